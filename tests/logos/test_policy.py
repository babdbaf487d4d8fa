"""The default command policy: in-place edits are refused wherever they hide; the rest runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from logos.approvals.policy import (
    CommandPolicy,
    allow_all,
    chain_policies,
    check_command,
)
from tests.support.parts import require

SED_SPELLED_APART = [
    # bash reads `sed -i` in each, though the text does not say it
    "\\sed -i s/a/b/ f",
    "s'e'd -i s/a/b/ f",
    "se\\\nd -i s/a/b/ f",
    "sed -i\\\n s/a/b/ f",
]
PERL_IN_PLACE = ["perl -i -pe 's/a/b/' f", "perl -pi -e 's/a/b/' f", "perl -i.bak -pe 's/a/b/' f"]

BLOCKED = [
    # sed spellings
    "sed -i 's/a/b/' f",
    "sed --in-place 's/a/b/' f",
    "sed --in-place=.bak 's/a/b/' f",
    "sed --in 's/a/b/' f",
    "sed -Ei 's/a+/b/' f",
    "sed -n -i 's/a/b/p' f",
    "sed -ni 'p' f",
    "sed -i.bak 's/a/b/' f",
    "sed 's/a/b/' -i f",
    "sed -e 's/a/b/' -i f",
    "sed -i '' 's/a/b/' f",
    "sed 2>/dev/null -i s/a/b/ f",
    "/usr/bin/sed -i s/a/b/ f",
    "/bin/sed -i s/a/b/ f",
    "gsed -i s/a/b/ f",
    *SED_SPELLED_APART,
    # perl, ruby, gawk
    *PERL_IN_PLACE,
    "perl -pie 's/a/b/' f",
    "perl -0777 -pi -e 's/a/b/' f",
    "perl -pe 's/a/b/' -i f",
    "perl -Mstrict -i -pe 1 f",
    "perl5.36 -pi -e 1 f",
    "ruby -pi -e 'x' f",
    "ruby -i.bak -pe 'x' f",
    "gawk -i inplace '{print}' f",
    "awk -i inplace '{print}' f",
    "gawk --include=inplace '{print}' f",
    # prefixes and wrappers
    "sudo sed -i s/a/b/ f",
    "sudo -u root -E sed -i s/a/b/ f",
    "sudo -- sed -i s/a/b/ f",
    "env VAR=x sed -i s/a/b/ f",
    "env -i PATH=/bin sed -i s/a/b/ f",
    "FOO=1 sed -i s/a/b/ f",
    "xargs sed -i s/a/b/",
    "find . -name '*.py' -print0 | xargs -0 -n 1 -P 4 sed -i s/a/b/",
    "command sed -i s/a/b/ f",
    "timeout 10 sed -i s/a/b/ f",
    "nice -n 5 sed -i s/a/b/ f",
    "busybox sed -i s/a/b/ f",
    "find . -name '*.txt' -exec sed -i s/a/b/ {} \\;",
    "find . -type f -execdir perl -pi -e s/a/b/ {} +",
    # command lists, pipelines, compound commands
    "ls && sed -i s/a/b/ f",
    "false || sed -i s/a/b/ f",
    "cd src; sed -i s/a/b/ f",
    "cat f | sed -i s/a/b/ g",
    "echo start\nsed -i s/a/b/ f",
    "sed -i s/a/b/ f &",
    "> log sed -i s/a/b/ f",
    "(cd src && sed -i s/a/b/ f)",
    "{ sed -i s/a/b/ f; }",
    "if true; then sed -i s/a/b/ f; fi",
    "for x in *.py; do sed -i s/a/b/ $x; done",
    "git stash && sed -i 's/old/new/g' src/*.py && git diff",
    # substitutions
    "echo $(sed -i s/a/b/ f)",
    "echo `sed -i s/a/b/ f`",
    'echo "$(sed -i s/a/b/ f)"',
    'echo "$(echo "$(sed -i s/a/b/ f)")"',
    "diff <(sed -i s/a/b/ f) g",
    "x=${y:-$(sed -i s/a/b/ f)}",
    "cat > f <<EOF\n$(sed -i s/a/b/ g)\nEOF",
    'echo "$(sed -i s/a/b/ f',
    # text handed to a shell
    "bash -c 'sed -i s/a/b/ f'",
    'sh -c "sed -i s/a/b/ f"',
    "bash -lc 'cd src && sed -i s/a/b/ f'",
    "bash -euo pipefail -c 'sed -i s/a/b/ f'",
    "/bin/zsh -c 'sed -i s/a/b/ f'",
    "bash -c \"sh -c 'sed -i s/a/b/ f'\"",
    "xargs -I{} sh -c 'sed -i s/a/b/ {}'",
    "eval 'sed -i s/a/b/ f'",
    "cat <<'EOF' | bash\nsed -i s/a/b/ f\nEOF",
    "bash <<'EOF'\nsed -i s/a/b/ f\nEOF",
    "bash <<-EOF\n\tsed -i s/a/b/ f\n\tEOF",
    "bash <<< 'sed -i s/a/b/ f'",
    "echo 'sed -i s/a/b/ f' | sh",
    "su -c 'sed -i s/a/b/ f' root",
    "flock /tmp/l -c 'sed -i s/a/b/ f'",
    "env -S 'sed -i s/a/b/ f'",
    "watch -n 1 'sed -i s/a/b/ f'",
    "ssh host 'sed -i s/a/b/ f'",
    # an accepted false alarm: an unquoted `sed -i` anywhere counts
    "echo sed -i",
]

ALLOWED = [
    "sed 's/a/b/' f",
    "sed -n '1,5p' f",
    "sed -e 's/-i//' f",
    "sed -e 's/a/b/' -e 's/c/d/' f > f.new && mv f.new f",
    "sed --expression=-i f",
    "sed -f edits.sed f",
    "sed -f -i.sed f",
    "sed --file -i.sed f",
    "sed -E 's/x+/y/' f",
    "sed -n '/-i/p' f",
    "sed s/a/b/ f | tee f.new",
    "cp f f.bak && sed 's/a/b/' f.bak > f",
    "grep -i sed f",
    "grep -rn 'sed -i' .",
    'echo "sed -i"',
    "echo 'sed -i s/a/b/ f'",
    'git commit -m "use sed -i"',
    "git commit -m 'replace sed -i with heredocs'",
    "perl -e 'print 1'",
    "perl -ne 'print if /-i/' f",
    "perl -lane 'print $F[0]' f",
    "perl -e '-i' f",
    "perl -I lib script.pl -i",
    "perl script.pl -i",
    "perl -MFile::Find -e 'find(sub {}, q(.))'",
    "ruby -e 'puts 1' -- -i",
    "awk '{print}' f",
    "gawk -i ./lib.awk '{print}' f",
    "awk -f prog.awk -v x=-i f",
    "cat > fix.sh <<'EOF'\nsed -i s/a/b/ f\nEOF",
    "cat > notes.md <<EOF\nUse sed -i carefully, or perl -pi -e.\nEOF\nls",
    "# sed -i s/a/b/ f\nls",
    "ls # then sed -i",
    "python -c 'print(\"sed -i\")'",
    "rg -i 'sed' src",
    "man sed",
    "which sed perl",
    "apt-get install -y sed",
    "bash script.sh",
    "bash -c 'sed s/a/b/ f'",
    "sh -c \"echo 'sed -i'\"",
    "find . -name '*.py' -exec grep -i sed {} +",
    "find . -exec sed 's/a/b/' {} \\; -exec grep -i x {} \\;",
    "echo 'unbalanced | sed -i s/a/b/ f",
    'echo "unbalanced $(ls',
    "",
    "   \n\t",
]


@pytest.mark.parametrize("command", BLOCKED)
def test_in_place_edits_are_refused(command: str) -> None:
    refusal = check_command(command)
    assert refusal is not None
    assert refusal.startswith("Refused: `")
    assert "in place" in refusal


@pytest.mark.parametrize("command", ALLOWED)
def test_other_commands_are_allowed(command: str) -> None:
    assert check_command(command) is None


def test_table_is_large_and_disjoint() -> None:
    assert len(BLOCKED) >= 40
    assert len(ALLOWED) >= 40
    assert not set(BLOCKED) & set(ALLOWED)


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("sed -i 's/a/b/' f", "`sed -i`"),
        ("sudo /usr/bin/sed -Ei.orig x f", "`sed -Ei.orig`"),
        ("sed --in-place=.bak x f", "`sed --in-place=.bak`"),
        ("perl -pi -e x f", "`perl -pi`"),
        ("gawk -i inplace 1 f", "`gawk -i inplace`"),
        ("gawk -iinplace 1 f", "`gawk -iinplace`"),
    ],
)
def test_refusal_names_what_was_refused(command: str, named: str) -> None:
    refusal = check_command(command)
    assert refusal is not None
    assert named in refusal


def test_refusal_says_why_and_what_to_do_instead() -> None:
    refusal = check_command("sed -i s/a/b/ f | cat")
    assert refusal is not None
    assert "invisible to review" in refusal
    assert "impossible to undo" in refusal
    assert "not run" in refusal
    assert "heredoc" in refusal and "sed without -i, then mv" in refusal


@pytest.mark.parametrize(
    ("command", "instead"),
    [
        (
            "sed -i 's/world/moon/g' greeting.txt",
            "sed s/world/moon/g greeting.txt > greeting.txt.new "
            "&& mv greeting.txt.new greeting.txt",
        ),
        (
            "sed -i '/DELETE ME/d' 'my list.txt'",
            "sed '/DELETE ME/d' 'my list.txt' > 'my list.txt.new' "
            "&& mv 'my list.txt.new' 'my list.txt'",
        ),
    ],
)
def test_a_plain_sed_in_place_is_answered_with_the_same_edit_through_a_new_file(
    command: str, instead: str, tmp_path: Path
) -> None:
    refusal = check_command(command)
    assert refusal is not None and refusal.endswith(f"through a new file: <cmd>{instead}</cmd>")
    text = "hello world\nDELETE ME\nthe world is round\n"
    results = []
    for name, script in (("in-place", command), ("rewritten", instead)):
        directory = tmp_path / name
        directory.mkdir()
        for file in ("greeting.txt", "my list.txt"):
            (directory / file).write_text(text)
        subprocess.run(["bash", "-c", script], cwd=directory, check=True)
        results.append({p.name: p.read_text() for p in sorted(directory.iterdir())})
    assert results[0] == results[1]  # the same files, the same text, no .new left behind
    assert results[0] != {"greeting.txt": text, "my list.txt": text}


@pytest.mark.parametrize(
    "command",
    [
        "sed -i.bak s/a/b/ f",
        "sed -i s/a/b/ f g",
        "sed -i -e s/a/b/ f",
        "cd x && sed -i s/a/b/ f",
        "sed -i s/a/b/ f > log",
    ],
)
def test_no_rewrite_is_offered_where_it_would_not_be_the_same_edit(command: str) -> None:
    refusal = check_command(command)
    assert refusal is not None and "through a new file" not in refusal
    # The suggested rewrite itself must pass the policy.
    assert check_command("sed 's/old/new/' f > f.new && mv f.new f") is None


def test_extreme_nesting_is_refused_not_crashed() -> None:
    deep = "echo " + "$(echo " * 200 + "hi" + ")" * 200
    refusal = check_command(deep)
    assert refusal is not None
    assert "too deep" in refusal
    assert "Split it" in refusal
    assert check_command("echo ${" * 5000) == refusal
    assert check_command("echo " + "`" * 5000) is None  # 2500 empty substitutions, not nested


def test_moderate_nesting_is_checked() -> None:
    command = "echo " + "$(echo " * 20 + "$(sed -i x f)" + ")" * 20
    refusal = check_command(command)
    assert refusal is not None
    assert "`sed -i`" in refusal


def test_large_heredoc_is_fast_enough_to_not_matter() -> None:
    body = "line with sed -i and $HOME and `not run`\n" * 20_000
    command = f"cat > big.txt <<'EOF'\n{body}EOF\nls"
    assert check_command(command) is None


def test_allow_all_allows_everything() -> None:
    policy: CommandPolicy = allow_all
    for command in BLOCKED:
        assert policy(command) is None


def test_chain_policies_first_refusal_wins() -> None:
    def no_rm(command: str) -> str | None:
        return "no rm" if command.startswith("rm") else None

    def no_anything(command: str) -> str | None:
        return "nothing"

    chained: CommandPolicy = chain_policies(no_rm, check_command, no_anything)
    assert chained("rm -rf x") == "no rm"
    assert chained("sed -i x f") == check_command("sed -i x f")
    assert chained("ls") == "nothing"
    assert chain_policies(allow_all, check_command)("ls") is None
    assert chain_policies()("sed -i x f") is None


SHELLISH = st.lists(
    st.sampled_from(
        [
            "sed",
            "perl",
            "-i",
            "-pi",
            " ",
            "'",
            '"',
            "\\",
            "$(",
            ")",
            "`",
            "${",
            "}",
            "<<",
            "EOF",
            "\n",
            "|",
            ";",
            "&&",
            "(",
            "bash",
            "-c",
            "<(",
            "#",
            "x",
            "<<<",
            "$'",
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(command=SHELLISH)
def test_never_raises_on_arbitrary_text(command: str) -> None:
    result = check_command(command)
    assert result is None or result.startswith("Refused: ")


@settings(max_examples=200, deadline=None)
@given(command=st.text(max_size=200))
def test_never_raises_on_arbitrary_unicode(command: str) -> None:
    result = check_command(command)
    assert result is None or result.startswith("Refused: ")


# --- the table against the real tools -----------------------------------------------------
# The policy's model of sed and perl is checked against what they really do: every command
# here is run by bash on a scratch file `f`, and must edit it exactly when it is refused.

REALLY_EDITS = [
    "sed -i 's/a/b/' f",
    "sed --in-place 's/a/b/' f",
    "sed --in 's/a/b/' f",
    "sed -Ei 's/a+/b/' f",
    "sed -n -i 's/a/b/p' f",
    "sed -i.bak 's/a/b/' f",
    "sed 's/a/b/' -i f",
    "sed -e 's/a/b/' -i f",
    "sed 2>/dev/null -i s/a/b/ f",
    *SED_SPELLED_APART,
    *PERL_IN_PLACE,
    "perl -0777 -pi -e 's/a/b/' f",
    "perl -pe 's/a/b/' -i f",
    "env VAR=x sed -i s/a/b/ f",
    "FOO=1 sed -i s/a/b/ f",
    "printf 'f\\0' | xargs -0 sed -i s/a/b/",
    "find . -name f -exec sed -i s/a/b/ {} \\;",
    "true && sed -i s/a/b/ f",
    "echo $(sed -i s/a/b/ f)",
    "echo `sed -i s/a/b/ f`",
    'echo "$(sed -i s/a/b/ f)"',
    "x=${y:-$(sed -i s/a/b/ f)}",
    "bash -c 'sed -i s/a/b/ f'",
    "bash -euo pipefail -c 'sed -i s/a/b/ f'",
    "bash -c \"sh -c 'sed -i s/a/b/ f'\"",
    "eval 'sed -i s/a/b/ f'",
    "cat <<'EOF' | bash\nsed -i s/a/b/ f\nEOF",
    "bash <<-EOF\n\tsed -i s/a/b/ f\n\tEOF",
    "bash <<< 'sed -i s/a/b/ f'",
    "echo 'sed -i s/a/b/ f' | sh",
    "cat > g <<EOF\n$(sed -i s/a/b/ f)\nEOF",
]

LEAVES_FILE_ALONE = [
    "sed 's/a/b/' f",
    "sed -f -i.sed f",
    "perl -e '-i' f",
    "sed -n '1,5p' f",
    "sed -e 's/-i//' f",
    "sed --expression=-i f",
    "sed -n '/-i/p' f",
    "grep -i sed f",
    'echo "sed -i"',
    "echo 'sed -i s/a/b/ f'",
    "perl -e 'print 1'",
    "perl -ne 'print if /-i/' f",
    "perl -lane 'print $F[0]' f",
    "cat > fix.sh <<'EOF'\nsed -i s/a/b/ f\nEOF",
    "# sed -i s/a/b/ f\nls",
    "bash -c 'sed s/a/b/ f'",
    "sh -c \"echo 'sed -i'\"",
    "find . -name f -exec sed 's/a/b/' {} \\; -exec grep -i x {} \\;",
    "echo 'unbalanced | sed -i s/a/b/ f",
]


def run_on_scratch_file(command: str, directory: Path) -> str:
    for tool in ("bash", "sed", "perl"):
        require(shutil.which(tool) is not None, f"{tool} is not installed")
    (directory / "f").write_text("a\n")
    subprocess.run(
        ["bash", "-c", command],
        cwd=directory,
        capture_output=True,
        timeout=30,
        check=False,
    )
    return (directory / "f").read_text()


@pytest.mark.parametrize("command", REALLY_EDITS)
def test_refused_commands_really_edit_in_place(command: str, tmp_path: Path) -> None:
    assert check_command(command) is not None
    assert run_on_scratch_file(command, tmp_path) == "b\n"


@pytest.mark.parametrize("command", LEAVES_FILE_ALONE)
def test_allowed_commands_really_leave_the_file_alone(command: str, tmp_path: Path) -> None:
    assert check_command(command) is None
    assert run_on_scratch_file(command, tmp_path) == "a\n"
