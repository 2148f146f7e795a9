"""The shell allow/deny policy on tree-sitter-bash parses: every smuggling form of the mcp-peers list D is
refused under the reference setup (allow ls,cat,echo,git,grep; deny rm,sudo,curl), plain commands pass."""

from __future__ import annotations

import pytest

from coretools.tools.shell_policy import Refused, ShellPolicy

ALLOW = ShellPolicy.from_prefixes(["ls", "cat", "echo", "git", "grep"], ["rm", "sudo", "curl"])
DENY = ShellPolicy.from_prefixes([], ["rm", "sudo", "curl"])

ALLOWED = [
    "ls -la", "git status", "git log --oneline | grep fix", "ls | grep x && echo ok || echo no", "ls &",
    "cat 'a b' \"c $d\"", "echo $HOME ${HOME}", "ls > /dev/null 2>&1", "echo done # rm -rf /", "ls\n\nls",
    "bash -c 'ls -la'", "sh -c \"echo hi\"", "(ls; echo x)", "{ ls; echo x; }", "if ls; then echo y; fi",
    "cat <<'EOF'\n$(not run)\nEOF", "git clean -n",
]  # fmt: skip

# (command, part of the refusal message)
REFUSED = [
    ("ls; rm -f x", "`rm` is on the denylist"),
    ("true && rm -f x", "not on the allowlist"),
    ("false || rm -f x", "not on the allowlist"),
    ("ls | sh", "`sh` is not on the allowlist"),
    ("cat payload | base64 -d | bash", "not on the allowlist"),
    ("echo hi\nrm -f x", "denylist"),
    ("echo hi\r rm -f x", "carriage return"),
    ("echo $(rm -f x)", "command substitution"),
    ('echo "$(ls)"', "command substitution"),
    ("echo `rm -f x`", "command substitution"),
    ("cat <(rm -f x)", "process substitution"),
    ("echo >(tee /tmp/p)", "process substitution"),
    ("echo $[ x='a[$(touch F)]', x ]", "could not be parsed"),
    ("x='a[$(touch F)]'; echo $(( x ))", "variable assignments"),
    ("echo $(( x ))", "arithmetic"),
    ("(( x ))", "arithmetic"),
    ("[[ $x -eq 1 ]] && ls", "[[ ]]"),
    ("echo ${x@P}", "only $NAME"),
    ("echo ${a[x]}", "only $NAME"),
    ("(rm -f x)", "denylist"),
    ("{ rm -f x; }", "denylist"),
    ("/usr/bin/sudo ls", "denylist"),
    ("./rm x", "denylist"),
    ("./ls", "not on the allowlist"),
    ("\\rm x", "not a literal word"),
    ("r''m x", "not a literal word"),
    ('"r"m x', "not a literal word"),
    ("r\\m x", "not a literal word"),
    ("/usr/bin/su*o ls", "not a literal word"),
    ("a=r;b=m;$a$b -f x", "variable assignments"),
    ("$a$b -f x", "not a literal word"),
    ("cat${IFS}/etc/passwd", "not a literal word"),
    ("$'\\x72m' x", "not a literal word"),
    ("{rm,-f,x}", "could not be parsed"),
    ("sh -c 'rm x'", "denylist"),
    ("bash -c 'touch x'", "not on the allowlist"),
    ("bash -lc 'ls'", "shell option -lc"),
    ('bash -c "$CMD"', "literal"),
    ("env rm x", "not on the allowlist"),
    ("xargs rm", "not on the allowlist"),
    ("python -c 'import os'", "not on the allowlist"),
    ("awk 'BEGIN{system(\"rm x\")}'", "not on the allowlist"),
    ("find . -exec rm {} \\;", "not on the allowlist"),
    ("git -c core.fsmonitor='rm x' status", "git -c"),
    ("git -c alias.z='!rm x' z", "git -c"),
    ("git rebase -x 'rm x' main", "rebase -x"),
    ("sed -n '1e rm x' f", "not on the allowlist"),
    ("timeout 1 rm x", "not on the allowlist"),
    ("nice rm x", "not on the allowlist"),
    ("busybox rm x", "not on the allowlist"),
    ("alias ls=rm; ls x", "not on the allowlist"),
    ("f(){ rm x; }; f", "function definitions"),
    ("echo x > ~/.bashrc", "redirections"),
    ("echo x >> .git/hooks/pre-commit", "redirections"),
    ("cat < /etc/shadow", "redirections"),
    ("ls 2> /srv/outside/x", "redirections"),
    ("bash <<< 'rm x'", "not on the allowlist"),
    ("cat <<EOF > ~/.ssh/authorized_keys\nkey\nEOF", "redirections"),
    ("cat <<EOF\n$(rm x)\nEOF", "command substitution"),
    ('eval "ls"', "eval"),
    (". ./written.sh", "not on the allowlist"),
    ("source ./written.sh", "not on the allowlist"),
    ("exec rm x", "not on the allowlist"),
    ("command rm x", "not on the allowlist"),
    ("echo\u00a0hi", "no-break space"),
    ("ls; " * 120 + "rm x", "more than 100 commands"),
    ("LD_PRELOAD=/tmp/x.so ls", "variable assignments"),
    ("PATH=/tmp/evil:$PATH ls", "variable assignments"),
    ("export BASH_ENV=x", "variable assignments"),
    ("for PATH in /tmp; do ls; done", "for loops"),
    ("ls (", "could not be parsed"),
]


@pytest.mark.parametrize("command", ALLOWED)
def test_allowed(command: str) -> None:
    ALLOW.check(command)


@pytest.mark.parametrize("command,why", REFUSED)
def test_refused_with_a_message_naming_the_part(command: str, why: str) -> None:
    with pytest.raises(Refused) as info:
        ALLOW.check(command)
    assert why in info.value.message
    assert info.value.message.startswith("`")  # names the refused part


@pytest.mark.parametrize(
    "command",
    ["ls; rm -f x", "echo $(rm -f x)", "cat <(rm x)", "eval 'rm x'", "bash -c 'rm x'", "env rm x", "xargs rm",
     "nice -n 5 rm x", "timeout -s KILL 5 rm x", "sudo -u root ls", "/usr/bin/sudo ls", "find . -exec rm {} +",
     "$a$b -f x", "r\\m x", "echo ${x@P}", "x=1; [[ $x -eq 1 ]]", "bash -c \"$(echo rm)\"", "watch rm x",
     "git -c core.pager=x log", "echo $(( x ))", "busybox rm x", "cat <<EOF\n$(rm x)\nEOF"],
)  # fmt: skip
def test_denylist_sees_through_wrappers_and_substitutions(command: str) -> None:
    with pytest.raises(Refused):
        DENY.check(command)


@pytest.mark.parametrize(
    "command",
    ["ls | wc -l", "make test > build.log 2>&1", "FOO=1 npm test", "echo $(date)", "find . -name '*.py' -exec wc -l {} +",
     "for f in *.py; do echo $f; done", "git push --dry-run", "echo $((1 + 2))"],
)  # fmt: skip
def test_denylist_allows_ordinary_commands(command: str) -> None:
    DENY.check(command)


def test_prefix_matching_is_by_words() -> None:
    policy = ShellPolicy.from_prefixes(["git status", "npm run test"], [])
    policy.check("git status --short")
    policy.check("npm run test -- --watch=false")
    for command in ["git statusx", "git push", "npm run testing", "git", "git $x"]:
        with pytest.raises(Refused):
            policy.check(command)


def test_path_prefix_on_the_allowlist_is_exact() -> None:
    policy = ShellPolicy.from_prefixes(["./scripts/check.sh"], [])
    policy.check("./scripts/check.sh --fast")
    with pytest.raises(Refused):
        policy.check("./other/check.sh")


def test_found_commands_include_nested_ones() -> None:
    found = ALLOW.check("ls | grep a && bash -c 'echo hi; git status'")
    assert [argv[0] for argv in found] == ["ls", "grep", "bash", "echo", "git"]


def test_no_policy_checks_nothing() -> None:
    assert ShellPolicy.from_prefixes([], []).check("rm -rf $(echo /)") == []
