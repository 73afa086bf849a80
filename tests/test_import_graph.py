"""The package's imports run one way: no module imports, even lazily inside a function, a module that
imports it back (directly or through others). docs/architecture.md's module map gives the order."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mapper"


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path, modules):
    """The package modules `path` imports, at any depth of its code: `from mapper.x import y` names
    mapper.x.y where that is a module, else mapper.x."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return {name for name in found if name in modules}


def graph():
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imports_of(path, paths) - {name} for name, path in paths.items()}


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(root):
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_package_imports_have_no_cycles():
    edges = graph()
    assert len(edges) > 50 and edges["mapper.runners.local"] >= {"mapper.jobs", "mapper.sinks"}
    assert cycles(edges) == []


def test_the_core_never_imports_its_callers():
    """The mapping core and the jobs know nothing of runners, the CLI or the API above them."""
    above = {"mapper.cli", "mapper.api", "mapper", "mapper.runners", "mapper.runners.local", "mapper.runners.cluster",
             "mapper.commands.map"}
    edges = graph()
    for name in ("mapper.pipeline", "mapper.jobs", "mapper.sinks", "mapper.paired", "mapper.render"):
        assert not edges[name] & above, (name, edges[name] & above)
