"""What clusterdeck needs from the machine and cannot bring itself: Java and Mosquitto.

``check_java()`` returns None when a Java 17+ runtime is there, else a message saying
what is missing and how to get it on this platform. Spark finds Java the way this does
(``$JAVA_HOME/bin/java``, else ``java`` on PATH; see Spark's bin/spark-class).

``check_mosquitto()`` returns None when Mosquitto is installed, else the notice that the
built-in amqtt broker is used and how to get the faster one. Missing Mosquitto is never
an error.

Standalone (no clusterdeck, no Qt imports): ``python packaging/prereqs.py`` prints both
checks and exits 1 when Java is missing.
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

_MOSQUITTO_HINTS = {
    "linux": "sudo apt install mosquitto (Debian/Ubuntu) or sudo dnf install mosquitto "
             "(Fedora)",
    "darwin": "brew install mosquitto",
    "win32": "the installer from mosquitto.org (add its folder to PATH)",
}

_SBIN = (Path("/usr/sbin"), Path("/usr/local/sbin"), Path("/opt/homebrew/sbin"),
         Path("/opt/homebrew/opt/mosquitto/sbin"), Path("/usr/local/opt/mosquitto/sbin"))


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


def mosquitto_installed() -> bool:
    """Both binaries clusterdeck uses, on PATH or in the sbin folders PATH often lacks."""
    def found(name: str) -> bool:
        if shutil.which(name):
            return True
        return any((folder / name).is_file() and os.access(folder / name, os.X_OK)
                   for folder in _SBIN)
    return found("mosquitto") and found("mosquitto_passwd")


def check_mosquitto(installed: bool | None = None) -> str | None:
    """None when Mosquitto is there, else the notice for the amqtt fallback."""
    if mosquitto_installed() if installed is None else installed:
        return None
    return ("Mosquitto is not installed; clusterdeck uses its built-in amqtt broker "
            "(slower, fine for a local cluster). For Mosquitto: "
            f"{_MOSQUITTO_HINTS.get(_platform(), 'see mosquitto.org')}.")


def main() -> int:
    java = check_java()
    print(java or "Java: ok")
    print(check_mosquitto() or "Mosquitto: ok")
    return 1 if java else 0


if __name__ == "__main__":
    sys.exit(main())
