"""What the views show, as data: Qt item models and the plain state behind them (the job
recorder, the replay, cluster profiles, the graph layout, the session's state), the
palette, and how times, durations and sizes are written (formatting). Models import no
view."""
