"""The layers as contracts: the import-linter contracts in pyproject.toml (each states an intent) hold,
and no module of coocflow imports another that imports it back, directly or around a cycle (each
import counted, at the top of a module or inside a function), but the contract's declared exceptions."""

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]


def test_the_layer_contract_holds():
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    done = subprocess.run([lint], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert f"{len(contracts)} kept, 0 broken" in done.stdout and len(contracts) >= 6


def _cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    modules = sorted(graph.modules)
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(module):
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for imported in imports[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(modules)))
    for module in modules:
        if module not in index:
            visit(module)
    return found


def _declared_exceptions() -> list[tuple[str, str]]:
    """The imports the layer contract names as its exceptions (`ignore_imports`): `coocflow.run` and
    `coocflow.verify` are also the Python API's functions, each package's `__call__` importing the API."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    ignored = [line for contract in contracts for line in contract.get("ignore_imports", [])]
    return [tuple(part.strip() for part in line.split("->")) for line in ignored]


def test_no_import_cycles():
    """No cycle but the declared exceptions: the two callable packages import the API that imports them."""
    graph = grimp.build_graph("coocflow")
    exceptions = _declared_exceptions()
    assert exceptions == [("coocflow.run", "coocflow.notebook"), ("coocflow.verify", "coocflow.notebook")]
    for importer, imported in exceptions:
        assert graph.direct_import_exists(importer=importer, imported=imported), (importer, imported)
        graph.remove_import(importer=importer, imported=imported)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b"]]


def _function_local_imports():
    import ast

    for path in sorted((REPO / "src" / "coocflow").rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for function in ast.walk(ast.parse(text)):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        yield path.relative_to(REPO), node.lineno, lines[node.lineno - 1]


def test_every_function_local_import_says_why_it_is_lazy():
    """An import inside a function only where it defers a measured start-up cost (JAX,
    matplotlib, pyarrow; an optional extra), each saying so on its line (`# lazy: ...`)."""
    found = list(_function_local_imports())
    assert found, "the check must see the function-local imports"
    unexplained = [f"{path}:{line}: {text.strip()}" for path, line, text in found if "# lazy:" not in text]
    assert not unexplained, "\n".join(unexplained)


def test_the_command_line_starts_without_jax_pyarrow_or_matplotlib():
    """What the lazy imports buy: `coocflow --help` imports none of the heavy libraries."""
    code = ("import sys, coocflow.cli; "
            "print(sorted(k for k in ('jax', 'pyarrow', 'matplotlib', 'numpy', 'scipy') if k in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_discrete_training_imports_no_diffrax(tmp_path):
    """Diffrax, Optimistix and Lineax serve the flow only (0.4 s of imports a warm `coocflow run tiny`
    would pay for nothing): a GD run, figures included, imports none of them."""
    code = ("import sys, coocflow; "
            f"coocflow.run('tiny', out={str(tmp_path / 'run')!r}, overrides={{'train.steps': 20}}); "
            "print(sorted(k for k in ('diffrax', 'optimistix', 'lineax') if k in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
