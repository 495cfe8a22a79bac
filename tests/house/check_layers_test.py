#!/usr/bin/env python3
"""check_layers.py on small made-up repositories: it must fail on a
forbidden edge, an unknown rule path and a feature test without the feature
header, and pass on a tree that keeps its rules."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")


def make_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout


GOOD = {
    "src/base/README.md": "# base\n\nMay include: `include/grove`.\n",
    "src/base/log.h": '#include "grove/grove.h"\n#include <vector>\n',
    "src/ir/README.md": "# ir\n\nMay include: `include/grove`,\n`src/base`.\n\nMust never include: `src/exec`.\n",
    "src/ir/schedule.h": '#include "base/log.h"\n#include "ir/wire.h"\n',
    "src/ir/wire.h": "#pragma once\n",
    "src/exec/README.md": "# exec\n\nMay include: `src/base`, `src/ir/wire.h`, `grove_build_info.h`.\n",
    "src/exec/run.cc": '#include "exec/run.h"\n#include "ir/wire.h"\n#include "grove_build_info.h"\n#if GROVE_HAVE_CUDA\n#endif\n',
    "src/exec/run.h": "#pragma once\n",
    "include/grove/grove.h": "#pragma once\n",
    "include/grove/README.md": "# api\n\nMay include: nothing of the repository.\n",
}


class CheckLayers(unittest.TestCase):
    def test_a_tree_that_keeps_its_rules_passes(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, GOOD)
            code, out = run(root)
            self.assertEqual(code, 0, out)

    def test_a_forbidden_edge_fails_naming_it(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **{"src/ir/bad.cc": '#include "exec/run.h"\n'}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("src/ir/bad.cc: includes src/exec/run.h, which src/ir/README.md does not allow", out)

    def test_a_file_rule_does_not_allow_its_neighbours(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **{"src/exec/x.cc": '#include "ir/schedule.h"\n'}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("includes src/ir/schedule.h", out)

    def test_a_rule_naming_a_missing_path_fails(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **{"src/base/README.md": "May include: `include/grove`, `src/nowhere`.\n"}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("names src/nowhere, which does not exist", out)

    def test_ifdef_of_a_feature_macro_fails(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **{"src/exec/z.cc": '#include "grove_build_info.h"\n#ifdef GROVE_HAVE_CUDA\n#endif\n'}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("src/exec/z.cc: tests whether a GROVE_HAVE_* macro is defined", out)

    def test_the_feature_header_must_come_first(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **{"src/exec/w.cc": '#if GROVE_HAVE_CUDA\n#endif\n#include "grove_build_info.h"\n'}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("src/exec/w.cc: tests a GROVE_HAVE_* macro before including", out)

    def test_angle_includes_of_the_repository_are_checked(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **{"src/ir/angle.cc": '#include <exec/run.h>\n#include <vector>\n'}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("src/ir/angle.cc: includes src/exec/run.h", out)

    def test_commented_out_and_disabled_includes_are_not_edges(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **{"src/ir/quiet.cc": '/*\n#include "exec/run.h"\n*/\n#if 0\n#include "exec/run.h"\n#endif\n'}))
            code, out = run(root)
            self.assertEqual(code, 0, out)

    def test_a_feature_test_without_the_feature_header_fails(self):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **{"src/exec/y.cc": "#if GROVE_HAVE_CUDA\n#endif\n"}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("src/exec/y.cc: tests a GROVE_HAVE_* macro", out)

    def test_a_source_outside_every_layer_fails(self):
        for stray in ("src/stray.cc", "plugins/p.cc", "tests/unit/t.cc"):
            with tempfile.TemporaryDirectory() as root:
                make_tree(root, dict(GOOD, **{stray: '#include "base/log.h"\n'}))
                code, out = run(root)
                self.assertEqual(code, 1, stray)
                self.assertIn(f"{stray}: no README.md with a 'May include:' rule", out)

    def test_a_test_folder_is_held_to_its_rule(self):
        tree = dict(GOOD, **{
            "tests/unit/README.md": "May include: `include/grove`, `src/base`.\n",
            "tests/unit/t.cc": '#include "base/log.h"\n#include "unit/helper.h"\n',
            "tests/unit/helper.h": "#pragma once\n",
        })
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, tree)
            self.assertEqual(run(root)[0], 0, run(root)[1])
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(tree, **{"tests/unit/u.cc": '#include "exec/run.h"\n'}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("tests/unit/u.cc: includes src/exec/run.h", out)

    def test_link_lines_keep_the_rule(self):
        cmake = {
            "src/base/CMakeLists.txt": "grove_layer(grove_base SOURCES log.cc)\n",
            "src/base/log.cc": '#include "base/log.h"\n',
            "src/ir/CMakeLists.txt": "grove_layer(grove_ir SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/schedule.cc\n"
                                     "            DEPS grove_base Threads::Threads)\n",
            "src/ir/schedule.cc": '#include "ir/schedule.h"\n',
            "src/exec/CMakeLists.txt": "file(GLOB S *.cc)\ngrove_layer(grove_exec SOURCES ${S} DEPS grove_base)\n",
        }
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **cmake))
            code, out = run(root)
            self.assertEqual(code, 0, out)
        # exec may include src/ir/wire.h only: linking grove_ir (schedule.cc) breaks its rule.
        bad = dict(cmake, **{"src/exec/CMakeLists.txt":
                             "file(GLOB S *.cc)\ngrove_layer(grove_exec SOURCES ${S} DEPS grove_base)\n"
                             "# a comment naming grove_ir is not a link\n"
                             "target_link_libraries(grove_exec PUBLIC grove_ir)\n"})
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **bad))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("src/exec/CMakeLists.txt: grove_exec links grove_ir (src/ir), which "
                          "src/exec/README.md does not allow", out)
        # base may include nothing but the public header: a DEPS edge up is caught too.
        up = dict(cmake, **{"src/base/CMakeLists.txt": "grove_layer(grove_base SOURCES log.cc DEPS grove_exec)\n"})
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(GOOD, **up))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("grove_base links grove_exec (src/exec)", out)

    def test_a_folder_library_needs_its_folder(self):
        # tools may include base/log.h alone: it may link a library built of
        # log.cc, not one built of a whole folder (whatever else is in it).
        tree = dict(GOOD, **{
            "tools/README.md": "May include: `include/grove`, `src/base/log.h`.\n",
            "tools/t.cc": '#include "base/log.h"\n',
            "src/base/log.cc": '#include "base/log.h"\n',
            "src/base/CMakeLists.txt": "grove_layer(grove_log SOURCES log.cc)\n"
                                       "file(GLOB S *.cc)\ngrove_layer(grove_base SOURCES ${S})\n"
                                       "add_library(grove::log ALIAS grove_log)\n",
            "tools/CMakeLists.txt": "add_executable(t t.cc)\ntarget_link_libraries(t PRIVATE grove::log)\n",
        })
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, tree)
            code, out = run(root)
            self.assertEqual(code, 0, out)
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, dict(tree, **{"tools/CMakeLists.txt":
                                          "add_executable(t t.cc)\ntarget_link_libraries(t PRIVATE grove_base)\n"}))
            code, out = run(root)
            self.assertEqual(code, 1)
            self.assertIn("tools/CMakeLists.txt: t links grove_base (src/base)", out)


if __name__ == "__main__":
    unittest.main()
