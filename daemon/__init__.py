"""fastvoice: the runtime of an offline text-to-speech appliance."""

__version__ = "0.1.0"
