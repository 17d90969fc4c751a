"""Commit subjects stay within 72 characters: the commit-msg hook refuses a longer one, and
CI checks every commit since the rule began (.ci/check-subjects)."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
HOOK = ROOT / ".githooks" / "commit-msg"


def run_hook(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message)
    return subprocess.run(
        [str(HOOK), str(path)], capture_output=True, text=True, cwd=ROOT, check=False
    )


@pytest.mark.parametrize("length", [1, 72])
def test_the_hook_takes_a_subject_of_at_most_72_characters(tmp_path, length):
    assert run_hook(tmp_path, "x" * length + "\n\nWhy, at any length. " * 10).returncode == 0


def test_the_hook_refuses_a_longer_subject_and_says_what_to_do(tmp_path):
    done = run_hook(tmp_path, "x" * 73 + "\n\nWhy.\n")
    assert done.returncode == 1
    assert "73 characters; keep it to 72" in done.stderr
    assert "the why in the body" in done.stderr


def test_the_hook_reads_the_subject_past_git_comments_and_blank_lines(tmp_path):
    assert run_hook(tmp_path, "# Please enter the message\n\n" + "x" * 80 + "\n").returncode == 1
    assert run_hook(tmp_path, "# " + "x" * 80 + "\nShort subject\n").returncode == 0


def test_a_range_with_a_long_subject_fails_ci(tmp_path):
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "T")
    git("config", "core.hooksPath", "/dev/null")
    git("commit", "-q", "--allow-empty", "-m", "first")
    git("commit", "-q", "--allow-empty", "-m", "short")
    git("commit", "-q", "--allow-empty", "-m", "y" * 90)
    check = [str(ROOT / ".ci" / "check-subjects")]

    def in_repo(*args: str) -> subprocess.CompletedProcess[str]:
        # The script works in its own checkout; the range is read there, so point git
        # at the temporary repository.
        return subprocess.run(
            [*check, *args],
            capture_output=True,
            text=True,
            check=False,
            env={"GIT_DIR": str(tmp_path / ".git"), "PATH": "/usr/bin:/bin"},
        )

    assert in_repo("HEAD~1..HEAD").returncode == 1
    assert "y" * 90 in in_repo("HEAD~1..HEAD").stderr
    assert in_repo("HEAD~2..HEAD~1").returncode == 0


def test_the_project_scripts_turn_the_hook_on_unless_another_was_chosen(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)

    def turn_on() -> str:
        subprocess.run(
            [
                "bash",
                "-c",
                f'. "{ROOT}/scripts/lib.sh"; TAPROOT_ROOT="{tmp_path}" use_project_hooks',
            ],
            check=True,
        )
        done = subprocess.run(
            ["git", "-C", str(tmp_path), "config", "--get", "core.hooksPath"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip()

    assert turn_on() == ".githooks"
    subprocess.run(["git", "-C", str(tmp_path), "config", "core.hooksPath", "mine"], check=True)
    assert turn_on() == "mine"
