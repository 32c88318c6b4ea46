"""Configuration (one TOML file plus overrides, Flink-like keys) and where files live."""
