"""The shell allow/deny policy on tree-sitter-bash parses: every smuggling form of the mcp-peers list D is
refused under the reference setup (allow ls,cat,echo,git,grep; deny rm,sudo,curl), plain commands pass."""

from __future__ import annotations

import pytest

from coretools.sandbox.exec_policy.launchers import OPAQUE_LAUNCHERS
from coretools.sandbox.shell_policy import CommandRefused, ShellPolicy

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
    with pytest.raises(CommandRefused) as info:
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
    with pytest.raises(CommandRefused):
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
        with pytest.raises(CommandRefused):
            policy.check(command)


def test_path_prefix_on_the_allowlist_is_exact() -> None:
    policy = ShellPolicy.from_prefixes(["./scripts/check.sh"], [])
    policy.check("./scripts/check.sh --fast")
    with pytest.raises(CommandRefused):
        policy.check("./other/check.sh")


def test_found_commands_include_nested_ones() -> None:
    found = ALLOW.check("ls | grep a && bash -c 'echo hi; git status'")
    assert [argv[0] for argv in found] == ["ls", "grep", "bash", "echo", "git"]


def test_no_policy_checks_nothing() -> None:
    assert ShellPolicy.from_prefixes([], []).check("rm -rf $(echo /)") == []


# -- words after a redirection -------------------------------------------------------------------------------

REDIRECTION_FORMS = ["git >/dev/null -c x=y status", "git 2>/dev/null -c x=y status", "git &>/dev/null -c x=y status",
                     "git >|/dev/null -c x=y status", "git 2>&1 -c x=y status", "git 2>/dev/null <&0 -c x=y status",
                     ">/dev/null git -c x=y status", "git >/dev/null -c x=y status | cat",
                     "ls && git 2>/dev/null -c x=y status", "! git >/dev/null -c x=y status",
                     "git <<< x >/dev/null -c x=y status", "git <<EOF -c x=y status\nbody\nEOF"]  # fmt: skip


@pytest.mark.parametrize("command", REDIRECTION_FORMS)
def test_words_after_a_redirection_are_arguments(command: str) -> None:
    with pytest.raises(CommandRefused) as info:
        ALLOW.check(command)
    assert "git -c" in info.value.message


def test_words_after_a_redirection_keep_their_order() -> None:
    found = ShellPolicy.from_prefixes(["git"], []).check("git 2>/dev/null log >/dev/null -n 1 2>&1 --oneline")
    assert found == [["git", "log", "-n", "1", "--oneline"]]


@pytest.mark.parametrize("command", ["{ ls; } >/dev/null rm x", "(ls) 2>/dev/null rm x", "declare >/dev/null x=1"])
def test_words_after_a_redirection_of_a_compound_command_are_refused(command: str) -> None:
    for policy in (ALLOW, DENY):
        with pytest.raises(CommandRefused):
            policy.check(command)


@pytest.mark.parametrize("command", ["command >/dev/null rm x", "env 2>/dev/null rm x", "nice >/dev/null rm x",
                                     "xargs >/dev/null rm", ">/dev/null rm x",
                                     "timeout 5 >/dev/null rm x"])  # fmt: skip
def test_denylist_sees_words_after_a_redirection(command: str) -> None:
    with pytest.raises(CommandRefused) as info:
        DENY.check(command)
    assert "denylist" in info.value.message


# -- the denylist holds ----------------------------------------------------------------------------------------

DENY_HOLDS = ["\\rm x", "r''m x", "/bin/rm x", "command rm x", "env rm x", "echo x | xargs rm", "env -S 'rm x'",
              "env -S'rm x'", "env -vS 'rm x'", "env -iS 'rm x'", "env --split-string='rm x'",
              "env --split-string 'rm x'", "env --split='rm x'", "env --sp='rm x'", "env -- rm x",
              "env -u HOME rm x", "env -C . rm x", ">/dev/null rm x", "bash -c -e 'rm x'", "bash +x -c 'rm x'",
              "bash -o posix -c 'rm x'", "bash --norc -c 'rm x'", "sh -c -- 'rm x'", "sh -c{,} 'rm x'"]  # fmt: skip


@pytest.mark.parametrize("command", DENY_HOLDS)
def test_denylist_holds(command: str) -> None:
    with pytest.raises(CommandRefused):
        DENY.check(command)


@pytest.mark.parametrize("command", ["env -S 'ls'", "env --split-string=ls", "env --spl=ls", "env -0S ls"])
def test_env_split_string_is_refused_in_both_modes(command: str) -> None:
    for policy in (DENY, ShellPolicy.from_prefixes(["env", "ls"], [])):
        with pytest.raises(CommandRefused) as info:
            policy.check(command)
        assert "split" in info.value.message or "-S" in info.value.message


# -- the argument table: one case (at least) per entry --------------------------------------------------------

# (allowed program, command, part of the refusal message)
TABLE_CASES = [
    ("git", "git -c core.fsmonitor=x status", "git -c"),
    ("git", "git config alias.x '!sh'", "git config"),
    ("git", "git lg", "git lg is refused"),
    ("git", "git --git-dir=evil status", "--git-dir"),
    ("git", "git log --output=../x", "--output"),
    ("git", "git grep --open=vi x", "--open-files-in-pager"),
    ("git", "git clone -u x . dst", "clone -u"),
    ("git", "git merge -s evil x", "strategy `evil`"),
    ("git", "git init ../x", "leaves the working directory"),
    ("git", "git mv -f a .git/config", ".git directory"),
    ("git", "git remote add x https://example.invalid/r", "git remote add"),
    ("git", "git bisect run sh", "bisect run"),
    ("git", "git submodule foreach sh", "submodule foreach"),
    ("git", "git filter-branch --tree-filter sh", "filter-branch"),
    ("git", "git fetch *", "glob"),
    ("git", "git status $HOME", "not literal"),
    ("sed", "sed -n '1e sh' f", "`e` command"),
    ("sed", "sed 's/x/y/e' f", "`e` flag"),
    ("sed", "sed 's/[/]/x/e' f", "`e` flag"),
    ("sed", "sed 's/x/y/w out' f", "`w` flag"),
    ("sed", "sed -n 'W out' f", "`W` command"),
    ("sed", "sed -f script f", "sed -f"),
    ("sed", "sed -i s/a/b/ ../f", "leaves the working directory"),
    ("sed", "sed -i'.git/*' p f", "backup suffix"),
    ("sed", "sed -i s/a/b/ .GIT/config", ".git directory"),
    ("sed", "sed -i s/a/b/ .g*/config", ".git directory"),
    ("sed", "sed --follow-symlinks -i s/a/b/ f", "--follow-symlinks"),
    ("gsed", "gsed -n '1e sh' f", "`e` command"),
    ("awk", "awk 'BEGIN{system(\"sh\")}'", "system()"),
    ("awk", "awk '{print | \"sh\"}'", "`|`"),
    ("awk", "awk 'BEGIN{\"sh\" | getline}'", "`|`"),
    ("awk", "awk '{print > \"out\"}'", "output redirection"),
    ("awk", "awk 'BEGIN{printf \"(\" > \"out\"}'", "output redirection"),
    ("awk", "awk '/\"/ { print > \"out\" } #\"' f", "regular expression"),
    ("awk", "awk -f prog.awk", "-f"),
    ("gawk", "gawk '@load \"x\"'", "`@`"),
    ("mawk", "mawk -W exec x", "-W"),
    ("nawk", "nawk 'BEGIN{system(\"sh\")}'", "system()"),
    ("find", "find . -exec ls ';'", "-exec"),
    ("find", "find . -okdir ls ';'", "-okdir"),
    ("find", "find . -fprint out", "-fprint"),
    ("find", "find . -fls out", "-fls"),
    ("find", "find . -delete", "-delete"),
    ("env", "env -i git status", "hardened environment"),
    ("env", "env -C /tmp ls", "leaves the working directory"),
    ("env", "env X=1 ls", "VAR=value"),
    ("xargs", "xargs git", "not literal"),
    ("xargs", "xargs --process-slot-var=GIT_DIR ls", "process-slot-var"),
    ("sudo", "sudo git status", "hardened environment"),
    ("doas", "doas git status", "hardened environment"),
    ("exec", "exec -c git status", "hardened environment"),
    ("time", "time -o out ls", "time -o"),
    ("nice", "nice git -c x=y status", "git -c"),
    ("nohup", "nohup git -c x=y status", "git -c"),
    ("timeout", "timeout 5 git -c x=y status", "git -c"),
    ("stdbuf", "stdbuf -o0 git -c x=y status", "git -c"),
    ("setsid", "setsid git -c x=y status", "git -c"),
    ("command", "command git -c x=y status", "git -c"),
    ("builtin", "builtin git -c x=y status", "git -c"),
    ("ionice", "ionice -c 3 git -c x=y status", "git -c"),
    ("taskset", "taskset 1 git -c x=y status", "git -c"),
    ("busybox", "busybox git -c x=y status", "git -c"),
    ("toybox", "toybox git -c x=y status", "git -c"),
    ("unbuffer", "unbuffer git -c x=y status", "git -c"),
    ("caffeinate", "caffeinate git -c x=y status", "git -c"),
    ("proxychains", "proxychains git -c x=y status", "git -c"),
    ("torsocks", "torsocks git -c x=y status", "git -c"),
    *[(name, f"{name} x ls", "cannot check") for name in OPAQUE_LAUNCHERS],
    ("tar", "tar --to-comm=sh -xf a.tar", "--to-command"),
    ("tar", "tar cIf sh x", "tar -I runs a command"),
    ("tar", "tar cFf sh x", "tar -F runs a command"),
    ("gtar", "gtar --use-compress=sh -cf a.tar x", "-I"),
    ("tar", "tar -xf a.tar", "extraction"),
    ("tar", "tar -cf host:x .", "remote host"),
    ("rsync", "rsync -avze sh a b", "-e"),
    ("zip", "zip -TT sh a.zip f", "-T"),
    ("less", "less -o out f", "-o"),
    ("less", "less '+!sh' f", "commands given with +"),
    ("sort", "sort --compress=sh f", "--compress-program"),
    ("ssh", "ssh -o ProxyCommand=sh host", "proxycommand"),
    ("scp", "scp -S sh a b", "-S"),
    ("sftp", "sftp -D sh host", "-D"),
    ("sftp", "sftp -b batch host", "sftp -b"),
    ("scp", "scp -D sh a b", "scp -D"),
    ("ssh", "ssh -I lib.so host", "PKCS#11"),
    ("ssh", "ssh -oPKCS11Provider=lib.so host", "pkcs11provider"),
    ("chrt", "chrt -T 1000 -d 0 git -c x=y status", "git -c"),
    ("man", "man -P sh ls", "-P"),
    ("sdiff", "sdiff --diff-program=sh a b", "--diff-program"),
    ("rg", "rg --pre=sh x", "--pre"),
    ("fd", "fd -x sh", "-x"),
    ("fdfind", "fdfind -HX sh", "-X"),
    ("split", "split --filt=sh f", "--filter"),
    ("wget", "wget --use-askpass=sh https://example.invalid", "--use-askpass"),
    ("hash", "hash -p /bin/sh ls", "hash -p"),
    ("enable", "enable -f ./x.so x", "enable -f"),
    ("mapfile", "mapfile -C sh -c 1 a", "mapfile -C"),
    ("readarray", "readarray -tC sh a", "readarray -C"),
    ("compgen", "compgen -C sh x", "compgen -C"),
    ("complete", "complete -C sh x", "complete -C"),
    ("bind", "bind -x '\"a\":sh'", "bind -x"),
    ("alias", "alias ls=sh", "alias definitions"),
    ("cd", "cd /tmp", "leaves the working directory"),
    ("pushd", "pushd ..", "leaves the working directory"),
]  # fmt: skip


@pytest.mark.parametrize("program,command,why", TABLE_CASES, ids=[f"{c[0]}:{c[1][:40]}" for c in TABLE_CASES])
def test_table_entry_refuses_and_names_the_part(program: str, command: str, why: str) -> None:
    policy = ShellPolicy.from_prefixes([program, "git", "ls"], [])
    with pytest.raises(CommandRefused) as info:
        policy.check(command)
    assert why in info.value.message


def test_every_table_entry_has_a_case() -> None:
    from coretools.sandbox.exec_policy import TABLE

    assert set(TABLE) <= {program for program, _, _ in TABLE_CASES}


# options that carry a command line are refused with only a denylist too
DENY_INLINE = ["git -c alias.x=y x", "git --config-env=a.b=C status", "git --exec-path=. x", "git grep -Ovi x",
               "git rebase --exe=sh main", "git fetch --upload-p=sh .", "git push --rece=sh .", "git clone -u sh . d",
               "git clone --conf=a.b=c . d", "git difftool -x sh", "git bisect run sh", "git submodule foreach sh",
               "git filter-branch --msg-filter sh", "tar --to-command=sh -xf a", "tar cIf sh x", "rsync -e sh a b",
               "zip -TT sh a.zip f", "less -o out f", "sort --compress-program=sh f", "ssh -oProxyCommand=sh h",
               "scp -S sh a b", "man -P sh ls", "sdiff --diff-program=sh a b", "watch ls"]  # fmt: skip


@pytest.mark.parametrize("command", DENY_INLINE)
def test_command_carrying_options_are_refused_with_a_denylist(command: str) -> None:
    with pytest.raises(CommandRefused):
        DENY.check(command)


EVERYDAY = ["git status", "git log -n 5", "git log --oneline -n 5 --format='%h %s'", "git diff",
            "git diff --stat HEAD~1",
            "git show HEAD:f", "git grep -n word", "git grep -c word", "git add f", "git add ./*.py", "git commit -m x",
            "git commit -am 'use the -x flag'", "git stash show stash@{0}", "git config --get user.name",
            "git remote -v", "git cherry-pick -x abc", "git merge -s ours x", "git rebase -i HEAD~2", "git log --cc",
            "git clone https://example.invalid/r dst", "git -C sub status", "git rev-parse --git-dir",
            "sed -n 1,20p f", "sed -i s/a/b/ f", "sed -i.bak 's/a/b/g' f", "sed -e 's/a/b/' -e '/^$/d' f",
            "sed 's#/usr#/opt#g' f", "sed ':a;N;$!ba;s/\\n/ /g' f", "sed '1i header' f", "sed 'y/abc/xyz/' f",
            "sed 's/[/]/x/' f", "awk '{print $1}' f", "awk -F: '$3 > 100 { print $1 }' f",
            "awk '{ if ($1 > 5) print $1 }' f", "awk '{ s += $1 } END { print s / NR }' f", "awk 'a || b' f",
            "awk '{ gsub(/a|b/, \"c\"); print }' f", "find . -name '*.py'", "find . -path ./.git -prune -o -print",
            "grep -r x --exclude-dir=.git .", "timeout 5 git status", "env git status", "tar -czf out.tgz src",
            "cd sub && git status"]  # fmt: skip


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_commands_pass_the_table(command: str) -> None:
    ShellPolicy.from_prefixes(["git", "sed", "awk", "find", "grep", "timeout", "env", "tar", "cd"], []).check(command)


# -- arguments the model could steer ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["cp x .git/config", "cp x $PWD/.git/config", "cp x \"$EMPTY\".git/config",
                                     "ln -s .git x", "touch .Git/hooks/x", "ls .g?t", "cp x .git./config",
                                     "cat .git/config"])  # fmt: skip
def test_no_program_may_name_a_path_inside_dot_git(command: str) -> None:
    with pytest.raises(CommandRefused) as info:
        ShellPolicy.from_prefixes(["cp", "ln", "touch", "ls", "cat"], []).check(command)
    assert ".git" in info.value.message


def test_dollar_underscore_is_refused_with_an_allowlist() -> None:
    with pytest.raises(CommandRefused) as info:
        ShellPolicy.from_prefixes(["echo", "cp"], []).check("echo .g; cp x ${_}it/config")
    assert "$_" in info.value.message
    DENY.check("echo $_")


def test_runs_programs_lists_what_can_start_programs() -> None:
    from coretools.sandbox.exec_policy import runs_programs

    assert runs_programs(["ls", "git", "/usr/bin/python3.12", "cat", "make", "git"]) == ["git", "python3.12", "make"]


@pytest.mark.anyio
async def test_one_start_up_warning_when_allowed_programs_can_run_programs(root, caplog) -> None:
    import logging

    from support import make_tool

    from coretools.tools.run_shell_command import RunShellCommand

    def warnings_for(*flags: str) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="coretools"):
            tools.append(make_tool(RunShellCommand, [root], "--shell-sandbox", "none", *flags))
        return [r.getMessage() for r in caplog.records if r.name == "coretools"]

    tools: list = []
    try:
        [message] = warnings_for("--allow-command", "git status", "--allow-command", "ls", "--allow-command", "python3")
        assert "git, python3 can run other programs" in message and "not a security boundary" in message
        assert warnings_for("--allow-command", "ls", "--allow-command", "cat") == []
        assert warnings_for("--deny-command", "rm") == []
        assert warnings_for() == []
        from coretools.sandbox.bwrap import bwrap_problem

        if bwrap_problem() is None:
            assert warnings_for("--allow-command", "git", "--shell-sandbox", "bwrap") == []
    finally:
        for tool in tools:
            await tool.aclose()


# the refusals of the table that no exploit above reaches: each still names its part
MORE_REFUSALS = [
    ("git", "git config --get x --add y", "git config --add"),
    ("git", "git remote --bogus", "git remote --bogus"),
    ("git", "git bisect visualize", "git bisect visualize"),
    ("sed", "sed --bogus p f", "`--bogus`"),
    ("sed", "sed -Z p f", "-Z"),
    ("sed", "sed 1 f", "without a command"),
    ("sed", "sed '\\[x[p' f", "delimiter"),
    ("sed", "sed y f", "`y` command"),
    ("sed", "sed k f", "command `k`"),
    ("sed", "sed s f", "delimiter"),
    ("sed", "sed s/a/b/X f", "flag `X`"),
    ("sed", "sed s/a f", "not terminated"),
    ("sed", "sed 's/[a/b/' f", "bracket"),
    ("sed", "sed s/a/b f", "replacement"),
    ("awk", "awk '{ x = getline /2/ 1 }'", "division or a regular expression"),
    ("awk", "awk 'BEGIN { print \"x }'", "string"),
    ("nice", "nice $X ls", "not literal"),
    ("timeout", "timeout $T ls", "not literal"),
    ("env", "env $X ls", "not literal"),
    ("env", "env -P /tmp ls", "-P"),
    ("xargs", "xargs $X ls", "not literal"),
    ("cd", "cd", "without a relative directory"),
    ("cd", "cd -", "without a relative directory"),
    ("bash", "bash -c", "needs its script"),
    ("trap", "trap 'sh' EXIT", "`sh` is not on the allowlist"),
    ("trap", "trap $X EXIT", "trap action that is not literal"),
    ("timeout", "timeout [5l]* git -c x=y status", "not literal"),
]  # fmt: skip


@pytest.mark.parametrize("program,command,why", MORE_REFUSALS)
def test_more_refusals_name_the_part(program: str, command: str, why: str) -> None:
    with pytest.raises(CommandRefused) as info:
        ShellPolicy.from_prefixes([program, "ls"], []).check(command)
    assert why in info.value.message


@pytest.mark.parametrize("command", ["trap 'rm x' EXIT", "trap -- 'rm x' INT", "hash -p /bin/rm ls", "BASH_CMDS[ls]=/bin/rm",
                                     "printf -v 'BASH_CMDS[ls]' /bin/rm", "compgen -C 'rm x' y", "mapfile -C 'rm x' a",
                                     "shopt -s expand_aliases; alias x=rm", "timeout [5r]* x", "nice -n 1 r* x"])  # fmt: skip
def test_denylist_holds_against_builtins_that_change_what_runs(command: str) -> None:
    with pytest.raises(CommandRefused):
        DENY.check(command)
    DENY.check("trap 'echo done' EXIT; trap - EXIT; trap -l; hash -r; alias")


@pytest.mark.parametrize("command", ["git -C . push", "git --no-pager push origin", "git --git-dir=.git push",
                                     "git --work-tree . push", "git -p push"])  # fmt: skip
def test_a_denied_subcommand_is_found_behind_global_options(command: str) -> None:
    policy = ShellPolicy.from_prefixes([], ["git push"])
    with pytest.raises(CommandRefused, match="denylist"):
        policy.check(command)
    policy.check("git -C . status")


def test_denylist_refusals_that_depend_on_unknown_words() -> None:
    with pytest.raises(CommandRefused, match="cannot tell whether"):
        ShellPolicy.from_prefixes([], ["git push"]).check("git $x origin")
    with pytest.raises(CommandRefused, match="eval of a string"):
        DENY.check("eval $x")
    with pytest.raises(CommandRefused, match="closing"):
        DENY.check("find . -exec rm x")


def test_a_directory_to_write_inside_dot_git_is_refused_by_the_entry_itself() -> None:
    from coretools.sandbox.exec_policy import check
    from coretools.sandbox.exec_policy.words import ArgumentRefused

    with pytest.raises(ArgumentRefused, match="inside a .git directory"):
        check("git", ["git", "-C", ".git", "status"], True)


def test_non_ascii_words_are_read_from_the_command_itself() -> None:
    """The grammar sees an ASCII view of the command; words and refusals still show the real text."""
    policy = ShellPolicy.from_prefixes(["échô", "echo"], None)
    found = policy.check("échô 日本 'ü x'; echo 😀")
    assert found == [["échô", "日本", "ü x"], ["echo", "😀"]]
    nested = policy.check("echo a | bash -c 'échô ü'")
    assert ["échô", "ü"] in nested
    with pytest.raises(CommandRefused) as refused:
        policy.check("ëcho 😀")
    assert "ëcho" in refused.value.message
    with pytest.raises(CommandRefused) as refused:
        policy.check("echo $é; ümlaut")
    assert "ümlaut" in refused.value.message


def test_a_pipeline_too_long_to_parse_is_refused_before_the_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """tree-sitter-bash needs memory that grows with the square of a pipeline's length (8,192 stages: about
    1 GiB), so a longer pipeline than the check parses is refused by a linear count, never parsed."""
    from coretools.sandbox import shell_policy

    def no_parse(*args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError("the command was parsed")

    monkeypatch.setattr(shell_policy._Checker, "script", no_parse)
    policy = ShellPolicy.from_prefixes([], ["rm"])
    with pytest.raises(CommandRefused, match="a pipeline of 8,193 commands"):
        policy.check("echo a" + " | cat" * 8192)
    with pytest.raises(CommandRefused, match="a pipeline of 258 commands"):
        policy.check("echo a" + " |\n cat" * 257)
