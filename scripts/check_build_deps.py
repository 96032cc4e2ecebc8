#!/usr/bin/env python3
"""Check that scripts/setup.sh installs everything a configured build uses.

A fresh Debian 12 machine has only its base system; whatever else CMake finds
must come from a package that scripts/setup.sh installs (or that one of those
packages depends on). CI machines often carry more than a fresh one (an
earlier run, a fuller image), so a build there can pass while a new user's
`cmake` fails: Debian's dnnl-config.cmake calls find_package(OpenCL), whose
headers and library arrive only through libdnnl-dev's Recommends, which
setup.sh skips with --no-install-recommends.

What counts as "used" (every absolute path outside the source and build
trees), read from a configured and built CMake build directory:
  - CMakeCache.txt: every FILEPATH/PATH entry (found libraries, include
    directories, <Pkg>_DIR config directories);
  - CMakeFiles/Makefile.cmake: every CMake file the configure step read
    (config files of find_package and the modules they include);
  - */compiler_depend.make and */flags.make: the headers each object includes
    and the include directories of each target;
  - */link.txt: the libraries each target links.
Each path (and its symlink target) is mapped to the Debian package that owns
it. The check fails when an owner is neither
  - in the base system (Essential: yes or Priority: required),
  - in setup.sh's package list, nor
  - reachable from that list through Depends / Pre-Depends (the packages
    apt installs with --no-install-recommends).
Paths owned by no package fail too, except the prefixes in ALLOWED_UNOWNED
(toolchains the base image of our machines ships outside dpkg).

Usage: scripts/check_build_deps.py BUILD_DIR [BUILD_DIR...]
Exit status: 0 all covered, 1 a dependency is missing from setup.sh, 2 usage.
"""

import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOWED_UNOWNED = ("/usr/local/cuda",)  # the CUDA toolkit (issue: GPU backend)
IGNORED_PREFIXES = ("/proc/", "/dev/", "/tmp/", "/etc/ld.so")


def setup_packages():
    out = subprocess.run([os.path.join(REPO, "scripts", "setup.sh"), "--list"],
                         check=True, capture_output=True, text=True).stdout
    return set(out.split())


def installed_packages():
    """name -> (essential_or_required, [dependency alternatives], [provides])."""
    fmt = "${Package}\t${Essential}\t${Priority}\t${Depends}\t${Pre-Depends}\t${Provides}\t${db:Status-Abbrev}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f", fmt], check=True, capture_output=True,
                         text=True).stdout
    pkgs = {}
    for line in out.splitlines():
        name, essential, priority, depends, predepends, provides, status = line.split("\t")
        if not status.startswith("ii"):
            continue
        alts = []
        for clause in filter(None, (c.strip() for c in (depends + "," + predepends).split(","))):
            alts.append([re.split(r"[\s(:]", a.strip())[0] for a in clause.split("|")])
        prov = [re.split(r"[\s(:]", p.strip())[0] for p in provides.split(",") if p.strip()]
        pkgs[name] = (essential == "yes" or priority == "required", alts, prov)
    return pkgs


def closure(roots, pkgs):
    providers = {}
    for name, (_, _, prov) in pkgs.items():
        for p in prov:
            providers.setdefault(p, []).append(name)
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in pkgs:
            continue
        seen.add(name)
        for alternatives in pkgs[name][1]:
            # Any installed alternative (or a provider of a virtual one)
            # satisfies the clause; follow all of them: apt picks one we have.
            for a in alternatives:
                todo.extend([a] + providers.get(a, []))
    return seen


def file_owners():
    owners = {}
    for lst in glob.glob("/var/lib/dpkg/info/*.list"):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        with open(lst, encoding="utf-8", errors="replace") as f:
            for path in f:
                owners.setdefault(path.rstrip("\n"), set()).add(pkg)
    return owners


def used_paths(build):
    paths = set()
    source = REPO
    with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("CMAKE_HOME_DIRECTORY:INTERNAL="):
                source = line.strip().split("=", 1)[1]  # the tree this build is of
            m = re.match(r"([^#/][^:=]*):(?:FILEPATH|PATH)=(/.*)$", line.strip())
            if m and not m.group(1).startswith("CMAKE_INSTALL"):  # where to install: not used
                paths.add(m.group(2))
    text = []
    for pattern in ("CMakeFiles/Makefile.cmake", "**/compiler_depend.make", "**/flags.make",
                    "**/link.txt"):
        for name in glob.glob(os.path.join(build, pattern), recursive=True):
            with open(name, encoding="utf-8", errors="replace") as f:
                text.append(f.read())
    for token in re.findall(r'(?<![\w.])(?:-I|-isystem\s*|")?(/[^\s";]+)', "\n".join(text)):
        paths.add(token.rstrip("\\"))
    roots = (os.path.realpath(source), os.path.realpath(build))
    return sorted(p for p in paths
                  if os.path.exists(p) and not os.path.realpath(p).startswith(roots)
                  and not p.startswith(roots) and not p.startswith(IGNORED_PREFIXES))


def owners_of(path, owners):
    """The packages that own path (a directory has many: any trusted one will
    do). A symlink counts as its own file (libfoo.so comes from libfoo-dev,
    its target from libfoo1); only an unowned path is looked up by its
    target. Debian 12 merges /lib into /usr/lib: dpkg may record either
    spelling."""
    for candidate in (path, os.path.realpath(path)):
        spellings = [candidate, candidate[4:] if candidate.startswith("/usr/") else "/usr" + candidate]
        found = set().union(*(owners.get(s, set()) for s in spellings))
        if found:
            return found
    return set()


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    pkgs = installed_packages()
    listed = setup_packages()
    not_installed = sorted(p for p in listed if p not in pkgs)
    base = {name for name, (req, _, _) in pkgs.items() if req}
    trusted = closure(listed | base, pkgs)
    owners = file_owners()
    missing, unowned, n_paths = {}, [], 0
    for build in argv[1:]:
        for path in used_paths(build):
            n_paths += 1
            pkgs_of_path = owners_of(path, owners)
            if not pkgs_of_path:
                if not path.startswith(ALLOWED_UNOWNED):
                    unowned.append(path)
            elif not pkgs_of_path & trusted:
                missing.setdefault(" or ".join(sorted(pkgs_of_path)), path)
    ok = not (missing or unowned or not_installed)
    for pkg in not_installed:
        print(f"check_build_deps: setup.sh lists {pkg}, which is not installed", file=sys.stderr)
    for pkg, path in sorted(missing.items()):
        print(f"check_build_deps: the build uses {path} from package {pkg}, which "
              f"scripts/setup.sh neither installs nor pulls in through Depends", file=sys.stderr)
    for path in unowned:
        print(f"check_build_deps: the build uses {path}, which no Debian package owns",
              file=sys.stderr)
    print(f"check_build_deps: {n_paths} paths used by {' '.join(argv[1:])}, "
          f"{len(listed)} packages in setup.sh ({len(trusted)} with dependencies and base): "
          f"{'all covered' if ok else 'MISSING'}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
