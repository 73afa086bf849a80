"""No file of the test suite imports a test module. Test modules share through conftest.py's fixtures and
plain helper modules (cli_checks.py, oracle.py, paired_common.py, ...): a test module imported by another
runs its module-level code twice, has its fixtures collected twice (a module-scoped cluster or a session
index built twice), and cannot be renamed, split or moved without breaking a module that only borrowed a
helper from it."""
import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_test_modules(source):
    """The names of the test modules (`test_*`) that Python source imports, at any depth (a function body
    too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        else:
            continue
        found += [name for name in names if name.split(".")[-1].startswith("test_")]
    return found


def test_no_file_of_the_suite_imports_a_test_module():
    offenders = {str(path.relative_to(TESTS)): names for path in sorted(TESTS.rglob("*.py"))
                 if (names := imported_test_modules(path.read_text()))}
    assert offenders == {}, "move what they share into conftest.py or a helper module"


def test_the_check_sees_every_form_of_import():
    source = ("import test_a\nimport os, test_b as b\nfrom test_c import x\nfrom pkg.test_d import y\n"
              "def f():\n    from test_e import z\nfrom oracle import read_sam\nimport testing\n")
    assert sorted(imported_test_modules(source)) == ["pkg.test_d", "test_a", "test_b", "test_c", "test_e"]
