"""The docs agree with the repository and the binary. Over every Markdown file
(README.md, docs/, examples/, handlers/, ...):

- every relative link leads to a file or folder that exists, and its
  #anchor to a heading of that page (GitHub's anchor rules);
- every repository path named in inline code (`sidecar/io/db.c`,
  `sql/grants/<role>.sql`, `tests/integration/test_*.py`) and every
  relative `handler` of a config example exists; a root file named alone
  (`DESIGN.md`) exists too;
- every config key named in inline code (`http.listen`, `consumers[0].prefetch`)
  and every key of a JSON config example is one `sidecar help config` lists;
- every command line (`sidecar ...` in sh blocks, plain blocks and inline
  code) names a command of `sidecar help` and only its options, with -c FILE
  in blocks;
- no words a newcomer cannot look up: issue numbers, "the seed".

Usage: test_docs.py SIDECAR_BINARY. Prints TAP: one line per check and file."""
import fnmatch
import glob
import json
import os
import re
import subprocess
import sys
import unicodedata
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import ok, done  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIDECAR = sys.argv[1]




# ---- what the repository and the binary know ----------------------------------

def markdown_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard", "*.md"],
                             capture_output=True, text=True, check=True).stdout.split()
        return sorted(set(out))
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk it
        found = []
        for d, dirs, files in os.walk(ROOT):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build")) and x != "node_modules"]
            found += [os.path.relpath(os.path.join(d, f), ROOT) for f in files if f.endswith(".md")]
        return sorted(found)


TOP = {e for e in os.listdir(ROOT) if not e.startswith(("build", ".local", ".git")) and e != "node_modules"}
TOP |= {".ci"} if os.path.isdir(os.path.join(ROOT, ".ci")) else set()

r = subprocess.run([SIDECAR, "help", "config"], capture_output=True, text=True)
KEYS = [l.split("|")[1].strip().strip("`") for l in r.stdout.splitlines()[2:] if l.startswith("| `")]
ok(r.returncode == 0 and len(KEYS) > 30, f"sidecar help config lists {len(KEYS)} keys")
SECTIONS = {k.split(".")[0].split("[")[0] for k in KEYS}

r = subprocess.run([SIDECAR, "help"], capture_output=True, text=True)
COMMANDS = {}  # command -> set of options; "words": sub-words it takes
for line in r.stdout.splitlines():
    m = re.match(r"^  ([a-z]+)(\s.*)?$", line)
    if not m:
        continue
    rest = m.group(2) or ""
    COMMANDS[m.group(1)] = {
        "options": set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", rest)) | ({"--config"} if "-c" in rest else set()),
        "needs_config": "-c FILE" in rest,
    }
ok(r.returncode == 0 and {"consume", "relay", "version"} <= set(COMMANDS),
   f"sidecar help lists {len(COMMANDS)} commands: {' '.join(sorted(COMMANDS))}")

FAULT_POINTS = set()
for d, _, files in os.walk(os.path.join(ROOT, "sidecar")):
    for f in files:
        if f.endswith(".c"):
            FAULT_POINTS |= set(re.findall(r'SC_FAULT\("([^"]+)"\)', open(os.path.join(d, f)).read()))
for f in glob.glob(os.path.join(ROOT, "producer", "*.c")):
    FAULT_POINTS |= set(re.findall(r'SC_FAULT\("([^"]+)"\)', open(f).read()))


# ---- Markdown, split into prose and code -------------------------------------------

def split_blocks(text):
    """[(kind, info, body, first line number)]: kind 'prose' or 'code'."""
    out, cur, start, fence, info = [], [], 1, None, ""
    for i, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", line)
        if fence is None and m:
            out.append(("prose", "", "\n".join(cur), start))
            cur, start, fence, info = [], i + 1, m.group(1), m.group(2)
        elif fence is not None and line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
            out.append(("code", info, "\n".join(cur), start))
            cur, start, fence = [], i + 1, None
        else:
            cur.append(line)
    out.append(("prose" if fence is None else "code", info, "\n".join(cur), start))
    return out


def inline_code(prose):
    """(token, line offset) of every inline code span."""
    spans = []
    for m in re.finditer(r"(`+)(.+?)\1", prose, re.S):
        spans.append((m.group(2).strip(), prose.count("\n", 0, m.start())))
    return spans


def without_code(prose):
    """prose with every inline code span blanked (its line breaks kept)."""
    return re.sub(r"(`+).+?\1", lambda m: "\n" * m.group(0).count("\n"), prose, flags=re.S)


def slug(heading):
    """GitHub's anchor for a heading."""
    h = re.sub(r"`", "", heading).strip().lower()
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = "".join(c for c in h if c in " -_" or unicodedata.category(c)[0] in "LN")
    return h.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for kind, _, body, _ in split_blocks(open(path).read()):
        if kind != "prose":
            continue
        for line in body.split("\n"):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                k = seen.get(s, 0)
                out.add(s if k == 0 else f"{s}-{k}")
                seen[s] = k + 1
    return out


def repo_path_exists(token, doc_dir):
    """None when token does not name a repository path, else whether it exists."""
    t = token.split()[0] if token.split() else ""
    t = t.rstrip(".,:;)")
    if not t or t.startswith(("/", "~", "$", "http:", "https:")) or "..." in t or "…" in t:
        return None
    if "/" not in t:
        # a root file named alone: README.md, Dockerfile, DESIGN.md
        if re.fullmatch(r"[A-Z][A-Za-z0-9_-]*\.md|Dockerfile|docker-compose\.yml|meson_options\.txt", t):
            return any(os.path.exists(os.path.join(base, t)) for base in (ROOT, doc_dir))
        return None
    first = t.split("/")[0]
    if first not in TOP:
        return None
    pattern = re.sub(r"<[^>]*>", "*", t)
    if "{" in pattern:  # {a,b,c}: each must exist
        m = re.search(r"\{([^}]*)\}", pattern)
        return all(repo_path_exists(pattern[:m.start()] + alt + pattern[m.end():], doc_dir)
                   for alt in m.group(1).split(","))
    if any(c in pattern for c in "*?["):
        return bool(glob.glob(os.path.join(ROOT, pattern)))
    return os.path.exists(os.path.join(ROOT, t))


FILE_EXT = ("c", "h", "py", "md", "json", "so", "sql", "yml", "yaml", "txt", "sh", "js", "pc", "service", "log")
KEY_RE = re.compile(r"^(%s)(\[\d*\])?\.[a-z0-9_]+(\[\d*\])?(\.[a-z0-9_]+(\[\d*\])?)*$")


def key_known(token):
    norm = re.sub(r"\[\d*\]", "[]", token)
    return norm in KEYS or any(k.startswith(norm + ".") or k.startswith(norm + "[]") for k in KEYS)


def looks_like_key(token):
    if token in FAULT_POINTS or token.rsplit(".", 1)[-1] in FILE_EXT:
        return False
    sections = "|".join(sorted(SECTIONS | {"console", "otel"}))
    return re.match(KEY_RE.pattern % sections, token) is not None


def config_keys(obj, prefix=""):
    """Every key path of a config example, handler_config's content left out."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{prefix}.{k}" if prefix else k
            out.append(p)
            if k != "handler_config":
                out += config_keys(v, p)
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)):
                out += config_keys(v, prefix + "[]")
    return out


def handlers_of(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "handler" and isinstance(v, str):
                yield v
            elif k != "handler_config":
                yield from handlers_of(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from handlers_of(v)


def command_lines(kind, info, body):
    """Logical `sidecar ...` lines of a block: sh blocks (any segment of a
    line), plain blocks (lines that start with it, after a $ prompt)."""
    lines, cur = [], ""
    for raw in body.split("\n"):
        cur += raw.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        lines.append(cur)
        cur = ""
    lines.append(cur)
    shell = info in ("sh", "bash", "shell", "console")
    if not shell and info:
        return []
    out = []
    for line in lines:
        s = re.sub(r"^\s*\$\s+", "", line)
        if shell:
            s = re.sub(r"(^|\s)#.*$", "", s)
            segments = re.split(r"&&|\|\||;|\|", s)
        else:
            segments = [s] if s.startswith("sidecar ") or s == "sidecar" else []
        for seg in segments:
            words = seg.split()
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                words = words[1:]
            if words and (words[0] == "sidecar" or words[0].endswith("/sidecar")) and \
                    (shell or words[0] == "sidecar"):
                out.append(" ".join(words))
    return out


def check_command(line, need_config):
    words = line.split()
    if len(words) < 2:
        return "no command"
    cmd = words[1]
    if cmd in ("--version", "--help", "-h"):
        return None
    if cmd not in COMMANDS:
        return f"unknown command '{cmd}'"
    spec = COMMANDS[cmd]
    opts = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", " ".join(words[2:])))
    bad = sorted(opts - spec["options"])
    if bad:
        return f"{cmd}: {', '.join(bad)} not among its options ({' '.join(sorted(spec['options'])) or 'none'})"
    if need_config and spec["needs_config"] and not ({"-c", "--config"} & opts):
        return f"{cmd}: -c FILE missing"
    return None


NEWCOMER = [(re.compile(r"\bissues? \d+(\.\d+)?\b", re.I), "an issue number"),
            (re.compile(r"\bthe seed\b|\bseed's\b", re.I), "'the seed' (say what it is)")]

# ---- the checks -------------------------------------------------------------------------

def check_doc(rel, text, problems):
    """Adds what is wrong in one Markdown file (rel: its path in the
    repository, text: its content) to problems."""
    path = os.path.join(ROOT, rel)
    doc_dir = os.path.dirname(path)
    for kind, info, body, start in split_blocks(text):
        if kind == "prose":
            plain = without_code(body)
            for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\[[^\]]+\]:\s*(\S+)", plain, re.M):
                target = m.group(1) or m.group(2)
                where = f"{rel}:{start + plain.count(chr(10), 0, m.start())}"
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(doc_dir, file_part)) if file_part else path
                if not os.path.exists(dest):
                    problems["links"].append(f"{where}: ({target}): {os.path.relpath(dest, ROOT)} does not exist")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    problems["links"].append(f"{where}: ({target}): no heading #{anchor} in {os.path.relpath(dest, ROOT)}")
            for rx, what in NEWCOMER:
                for m in rx.finditer(plain):
                    problems["words"].append(f"{rel}:{start + plain.count(chr(10), 0, m.start())}: "
                                             f"{what}: '{m.group(0)}'")
            for tok, off in inline_code(body):
                where = f"{rel}:{start + off}"
                e = repo_path_exists(tok, doc_dir)
                if e is False:
                    problems["files"].append(f"{where}: `{tok}` does not exist in the repository")
                if looks_like_key(tok) and not key_known(tok):
                    problems["keys"].append(f"{where}: `{tok}` is not a key of `sidecar help config`")
                if tok.startswith("sidecar "):
                    why = check_command(tok, need_config=False)
                    if why:
                        problems["commands"].append(f"{where}: `{tok}`: {why}")
        else:
            where = f"{rel}:{start}"
            if info == "json":
                try:
                    obj = json.loads(body)
                except ValueError:
                    obj = None
                if isinstance(obj, dict) and (set(obj) & SECTIONS):
                    paths = config_keys(obj)
                elif isinstance(obj, dict) and {"name", "handler"} <= set(obj):
                    paths = ["consumers[]." + p for p in config_keys(obj)]
                else:
                    paths = []
                for p in paths:
                    if not key_known(p):
                        problems["keys"].append(f"{where}: JSON example key `{p}` is not a key of `sidecar help config`")
                for h in handlers_of(obj) if paths else ():
                    if repo_path_exists(h, doc_dir) is False:
                        problems["files"].append(f"{where}: handler \"{h}\" does not exist in the repository "
                                                 "(built handlers live in the build tree or the install's handler folder)")
            for line in command_lines(kind, info, body):
                why = check_command(line, need_config=True)
                if why:
                    problems["commands"].append(f"{where}: `{line}`: {why}")
            if info in ("sh", "bash", "shell"):
                for line in body.split("\n"):
                    for seg in re.split(r"&&|;|\|", re.sub(r"(^|\s)#.*$", "", line)):
                        w = [x for x in seg.split() if not re.match(r"^[A-Z_][A-Z0-9_]*=", x)]
                        if w and "/" in w[0] and repo_path_exists(w[0], doc_dir) is False:
                            problems["files"].append(f"{where}: `{w[0]}` does not exist in the repository")

def new_problems():
    return {"links": [], "files": [], "keys": [], "commands": [], "words": []}


# The checks catch what they are for: a page with one fault of each kind.
BAD = """# A page

See [the guide](guide-that-is-gone.md) and [a section](contract.md#no-such-heading).
The loader is `sidecar/config_gone.c`, the design is in `DESIGN.md`.
Set `http.listen_address` or `consumers[0].prefetchh`. Since issue 12 the seed decides.

```sh
sidecar consume -c FILE --verbose
sidecar frobnicate -c FILE
sidecar purge --older-than 7d
```

```json
{ "amqp": { "url": "amqp://x" }, "mysql": { "url": "mysql://x" },
  "consumers": [ { "name": "a", "handler": "handlers/gone/gone.so", "prefetchh": 1 } ] }
```
"""
selftest = new_problems()
check_doc("docs/selftest.md", BAD, selftest)
want = {"links": 2, "files": 3, "keys": 3, "commands": 3, "words": 2}
got = {k: len(v) for k, v in selftest.items()}
ok(got == want, f"a page with one fault of each kind is caught: {got}",
   [f"{k}: {x}" for k, v in selftest.items() for x in v])

problems = new_problems()
files = markdown_files()
for rel in files:
    check_doc(rel, open(os.path.join(ROOT, rel)).read(), problems)

ok(len(files) >= 10, f"{len(files)} Markdown files read", files)
ok(not problems["links"], "every relative link and #anchor leads somewhere", problems["links"])
ok(not problems["files"], "every repository path the docs name exists", problems["files"])
ok(not problems["keys"], "every config key the docs name is in `sidecar help config`", problems["keys"])
ok(not problems["commands"], "every `sidecar` command line parses against `sidecar help`", problems["commands"])
ok(not problems["words"], "no issue numbers or 'the seed' in the docs", problems["words"])
done()
