"""The house: every import between our modules, read from the source (function-level imports
included), forms no circle; a module two others need is a leaf they both import."""

from __future__ import annotations

import ast

from tests.conftest import REPO

PACKAGES = ("daemon", "edge_build")


def import_graph() -> dict[str, set[str]]:
    modules = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            graph[name] |= {target for target in targets if target in modules} - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    graph = import_graph()
    assert len(graph) > 100
    assert circles(graph) == []


# The modules left at the top of daemon/, each a leaf that every floor may import.
TOP_LEVEL = {
    "__init__": "the version",
    "__main__": "`python -m daemon`",
    "errors": "errors a user can act on, raised everywhere",
    "events": "the job events, read by the light `say` client too (stdlib only)",
    "faults": "fault injection for the fault tests",
    "parts": "how a model stage's parts are named (backends, voices, edge_build)",
    "validation": "pydantic errors as key paths (config and payloads)",
    "local_socket": "the local socket's protocol and client (the CLI and the service)",
}


def test_the_runtime_lives_in_subpackages_named_for_what_is_in_them():
    top = {path.stem for path in (REPO / "daemon").glob("*.py")}
    assert top <= set(TOP_LEVEL), sorted(top - set(TOP_LEVEL))
    packages = {path.parent.name for path in (REPO / "daemon").glob("*/__init__.py")}
    assert {"service", "mqtt", "speech", "box", "adapters", "voices", "runtime"} <= packages
    assert {"app", "admin"} <= packages


# The floors, lowest first: a module imports only from its own floor or those below. A module
# is on the floor of the longest name that holds it.
FLOORS = [
    (
        "the leaves",
        [
            *("daemon", "daemon.errors", "daemon.events", "daemon.faults", "daemon.parts"),
            *("daemon.validation", "daemon.local_socket", "daemon.box"),
        ],
    ),
    ("the config's models", ["daemon.config"]),
    ("text, audio and the runtimes", ["daemon.text", "daemon.audio", "daemon.runtime"]),
    ("the voices and their builds", ["daemon.voices", "edge_build"]),
    ("speech", ["daemon.speech"]),
    ("the service's core and its front door", ["daemon.service"]),
    ("the adapters (MQTT among them)", ["daemon.adapters", "daemon.mqtt"]),
    ("the composition root and the box's chores", ["daemon.app", "daemon.admin"]),
    ("the command line", ["daemon.cli", "daemon.__main__"]),
]
# Imports that climb, each with its reason.
CLIMBS: dict[tuple[str, str], str] = {}


def floor_of(module: str) -> int:
    held = [
        (len(name), number)
        for number, (_, names) in enumerate(FLOORS)
        for name in names
        if module == name or module.startswith(name + ".")
    ]
    assert held, f"{module} is on no floor"
    return max(held)[1]


def test_no_import_climbs_to_a_higher_floor_without_its_reason():
    graph = import_graph()
    climbs = {
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if floor_of(target) > floor_of(module)
    }
    assert climbs == set(CLIMBS)


INTERNALS = ("daemon.service.lanes", "daemon.service.jobs", "daemon.service.intake")
INTERNALS += ("daemon.speech.synthesizer", "daemon.audio.player", "daemon.voices.registry")


def test_adapters_go_through_the_front_door():
    graph = import_graph()
    adapters = [m for m in graph if m.startswith(("daemon.adapters.", "daemon.mqtt."))]
    reached = {(m, t) for m in adapters for t in graph[m] if t in INTERNALS}
    assert reached == set()


LONG = 60
REASON = "# Over 60 lines:"


def test_no_function_over_60_lines_without_its_reason_written_above_it():
    unexplained = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            lines = path.read_text(encoding="utf-8").splitlines()
            for node in ast.walk(ast.parse("\n".join(lines))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if node.end_lineno - node.lineno + 1 <= LONG:
                    continue
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if not lines[first - 2].strip().startswith(REASON):
                    unexplained.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert unexplained == []


def folder_of(module: str) -> str:
    """A module's folder as the house is counted: each subpackage of daemon/, each of daemon's
    top-level modules, edge_build/."""
    parts = module.split(".")
    if parts[0] == "edge_build" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


# Folders that import each other, each pair with its reason (at most one).
FOLDER_PAIRS: dict[frozenset[str], str] = {}


def test_folders_import_each_other_only_with_their_reason():
    graph = import_graph()
    between = {
        (folder_of(module), folder_of(target))
        for module, targets in graph.items()
        for target in targets
        if folder_of(module) != folder_of(target)
    }
    assert ("daemon.app", "daemon.adapters") in between  # the count sees folders
    pairs = {frozenset(pair) for pair in between if pair[::-1] in between}
    assert pairs == set(FOLDER_PAIRS)
    assert len(FOLDER_PAIRS) <= 1


LONGEST_CLASS = 250


def test_no_class_over_250_lines():
    long = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.ClassDef)
                    and node.end_lineno - node.lineno + 1 > LONGEST_CLASS
                ):
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert long == []
