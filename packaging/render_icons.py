"""Render the PNG icons from icons/io.github.clusterdeck.svg with Qt's SVG renderer.

    QT_QPA_PLATFORM=offscreen python packaging/render_icons.py

Run it after changing the SVG; the PNGs are kept in the repo so installing the desktop
entry needs no renderer.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ICONS = Path(__file__).resolve().parent / "icons"
NAME = "io.github.clusterdeck"
SIZES = (48, 128, 256)


def render(size: int, renderer: QSvgRenderer, target: Path) -> None:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    if not image.save(str(target)):
        raise OSError(f"could not write {target}")


def main() -> int:
    _app = QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(ICONS / f"{NAME}.svg"))
    if not renderer.isValid():
        print("the SVG did not parse", file=sys.stderr)
        return 1
    for size in SIZES:
        render(size, renderer, ICONS / f"{NAME}-{size}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
