"""pyree-check-module: passing and failing check tests, and a module with nothing to check."""

from tool_process import assert_clean_error, run_tool


def test_a_failing_check_fails_the_run_and_is_located(checks_module):
    proc = run_tool("check_module", f"--module={checks_module}", "--device=local-sync")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "[==========] Running 2 tests from module 'checks_test'."
    assert lines[1] == "[ RUN      ] passes"
    assert lines[2].startswith("[       OK ] passes (")
    assert lines[3] == "[ RUN      ] fails"
    failure = lines[4]
    assert failure.startswith("  checks.mlir:fails:7: ") and "expect_eq" in failure
    assert lines[5].startswith("[  FAILED  ] fails (")
    assert lines[6:] == [
        "[==========] 2 tests ran.",
        "[  PASSED  ] 1 tests.",
        "[  FAILED  ] 1 tests, listed below:",
        "[  FAILED  ] fails",
    ]
    assert "Traceback" not in proc.stderr


def test_all_passing_exits_zero(passing_checks_module):
    proc = run_tool("check_module", "--module", passing_checks_module)
    assert proc.returncode == 0, proc.stderr
    assert "[       OK ] passes" in proc.stdout and "[  PASSED  ] 1 tests." in proc.stdout
    assert "FAILED" not in proc.stdout


def test_nothing_to_check(single_module):
    assert_clean_error(
        run_tool("check_module", f"--module={single_module}"),
        1,
        "exports no function without arguments, so there is nothing to check",
    )


def test_check_errors(tmp_path, checks_module):
    assert_clean_error(run_tool("check_module", f"--module={tmp_path / 'x.vmfb'}"), 1, "x.vmfb")
    assert_clean_error(run_tool("check_module"), 2, "no module given")
    assert_clean_error(
        run_tool("check_module", f"--module={checks_module}", "--device=nosuch"), 1, "nosuch"
    )
