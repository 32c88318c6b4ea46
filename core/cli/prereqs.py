"""What clusterdeck needs from the machine and cannot bring itself: Java (and Mosquitto).

``check_java()`` returns None when a Java 17+ runtime is there, else a message saying
what is missing and how to get it on this platform. Spark finds Java the way this does
(``$JAVA_HOME/bin/java``, else ``java`` on PATH; see Spark's bin/spark-class).

Mosquitto's check lives with the broker (``broker.mosquitto.check_mosquitto``): missing
Mosquitto is never an error. ``python -m clusterdeck.core.cli.prereqs`` prints both checks
and exits 1 when Java is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

JAVA_MINIMUM = 17

_JAVA_HINTS = {
    "linux": "  Debian 12, Ubuntu 22.04/24.04:  sudo apt install openjdk-17-jre-headless\n"
             "  Debian 13:                      sudo apt install openjdk-21-jre-headless\n"
             "  Fedora:                         sudo dnf install java-21-openjdk-headless\n"
             "  any Linux:                      a Temurin 17 or 21 JRE from adoptium.net",
    "darwin": "  brew install openjdk@21   (or a Temurin 17/21 package from adoptium.net)",
    "win32": "  winget install EclipseAdoptium.Temurin.21.JRE   (or an installer from "
             "adoptium.net)",
}


def _platform() -> str:
    return "linux" if sys.platform.startswith("linux") else sys.platform


def find_java() -> tuple[str | None, str]:
    """The java Spark will run, and where it was looked for."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / ("java.exe" if os.name == "nt" else "java")
        return (str(candidate) if candidate.is_file() else None), f"JAVA_HOME ({home})"
    return shutil.which("java"), "PATH"


def java_major(version_output: str) -> int | None:
    """The feature release in ``java -version``'s output: 8 for "1.8.0_402", 17 for
    "17.0.15", 21 for "21" (early-access builds say "21-ea")."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?[^"]*"', version_output)
    if not found:
        return None
    major = int(found.group(1))
    if major == 1 and found.group(2):
        major = int(found.group(2))
    return major


def check_java() -> str | None:
    """None when Java JAVA_MINIMUM+ is usable, else what is wrong and how to fix it."""
    java, where = find_java()
    how = (f"Install Java {JAVA_MINIMUM} or newer, then start clusterdeck again "
           f"(or point JAVA_HOME at a JDK/JRE folder):\n{_JAVA_HINTS.get(_platform(), '')}")
    if java is None:
        return (f"clusterdeck needs Java {JAVA_MINIMUM} or newer for Spark, and there is no "
                f"java in {where}.\n{how}").rstrip()
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return (f"clusterdeck needs Java {JAVA_MINIMUM} or newer for Spark; {java} (from "
                f"{where}) does not run: {error}.\n{how}").rstrip()
    output = (done.stderr or "") + (done.stdout or "")
    major = java_major(output)
    if major is None:
        first = output.strip().splitlines()[:1] or ["no output"]
        return (f"clusterdeck needs Java {JAVA_MINIMUM} or newer for Spark; {java} (from "
                f"{where}) did not tell its version ({first[0]}).\n{how}").rstrip()
    if major < JAVA_MINIMUM:
        return (f"clusterdeck needs Java {JAVA_MINIMUM} or newer for Spark; {java} (from "
                f"{where}) is Java {major}.\n{how}").rstrip()
    return None


def main() -> int:
    from clusterdeck.broker.mosquitto import check_mosquitto

    java = check_java()
    print(java or "Java: ok")
    print(check_mosquitto() or "Mosquitto: ok")
    return 1 if java else 0


if __name__ == "__main__":
    sys.exit(main())
