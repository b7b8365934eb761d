"""Imported at the start of every child a test runs with `tests.tree.environment()`.

With $TESTS_TREE_UNDER_TEST set, a finder placed first on sys.meta_path looks where the import
system would find `blob_safetynet`; anywhere outside that tree, the child says so on stderr and
exits 97 before it runs a line of the other copy. Then the test's own start-up hooks, the
modules named in $TESTS_CHILD_HOOKS, are imported. Only `os` and `sys` are imported here, so
the tests that count a child's modules count the command's own.
"""

import os
import sys


class TreeGuard:
    def __init__(self, tree):
        self.tree = os.path.realpath(tree)

    def find_spec(self, name, path=None, target=None):
        if name != "blob_safetynet":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        where = os.path.realpath(spec.origin or next(iter(spec.submodule_search_locations or ())))
        if not where.startswith(self.tree + os.sep):
            sys.stderr.write(
                f"tests/tree_guard: this child would import blob_safetynet from {where}, "
                f"not from the tree under test {self.tree}\n"
            )
            sys.stderr.flush()
            os._exit(97)
        return spec


if os.environ.get("TESTS_TREE_UNDER_TEST"):
    sys.meta_path.insert(0, TreeGuard(os.environ["TESTS_TREE_UNDER_TEST"]))
for _hook in filter(None, os.environ.get("TESTS_CHILD_HOOKS", "").split(",")):
    __import__(_hook)
