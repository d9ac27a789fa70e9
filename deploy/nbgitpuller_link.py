"""Print the course's nbgitpuller link for a hub: `make class-link HUB=https://hub.example.org`.

    python deploy/nbgitpuller_link.py HUB_URL [--repo URL] [--branch main] [--lesson 00_start_here]

A learner who opens the link logs in to the hub, which starts their server; nbgitpuller then
clones the course into ~/course (or, on later visits, merges the course's new commits into it,
keeping the learner's own changes) and opens the lesson. Send the same link again after every
update of the course. --repo defaults to this clone's `origin` remote.
"""

import argparse
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

COURSE = Path(__file__).resolve().parents[1]
TARGET = "course"  # the folder in each learner's home (deploy/jupyterhub_config.py, config.yaml)


def link(hub: str, repo: str, branch: str = "main", lesson: str = "00_start_here") -> str:
    query = urlencode(
        {
            "repo": repo,
            "branch": branch,
            "targetpath": TARGET,  # without it the folder is named after the URL
            "urlpath": f"lab/tree/{TARGET}/notebooks/{lesson}.ipynb",
        }
    )
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def origin() -> str:
    return subprocess.run(
        ["git", "remote", "get-url", "origin"], cwd=COURSE, capture_output=True, text=True
    ).stdout.strip()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hub", help="the hub's address, e.g. https://hub.example.org")
    parser.add_argument("--repo", default=None, help="the course's git URL (default: origin)")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--lesson", default="00_start_here", help="the notebook it opens")
    args = parser.parse_args(argv)
    repo = args.repo or origin()
    if not repo:
        print("no --repo given and this clone has no `origin` remote", file=sys.stderr)
        return 2
    print(link(args.hub, repo, args.branch, args.lesson))
    return 0


if __name__ == "__main__":
    sys.exit(main())
