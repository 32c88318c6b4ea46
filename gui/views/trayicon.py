"""The tray icon's picture: a disc in the colour of the cluster's health. GUI thread only
(QPixmap)."""

from __future__ import annotations

from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap

from clusterdeck.gui.models.health import Health

HEALTH_COLOURS = {Health.NONE: "#9aa4b2", Health.OK: "#27ae60", Health.WARN: "#e6a23c",
                  Health.DOWN: "#d64541"}


def health_icon(level: Health) -> QIcon:
    pixmap = QPixmap(64, 64)
    pixmap.fill(QColor(0, 0, 0, 0))
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(QColor(HEALTH_COLOURS[level]))
    painter.setPen(QColor("#33404f"))
    painter.drawEllipse(6, 6, 52, 52)
    painter.end()
    return QIcon(pixmap)
