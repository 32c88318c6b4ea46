"""What the views show, as data: Qt item models and the plain state behind them (the job
recorder, the replay, cluster profiles, the graph layout)."""
