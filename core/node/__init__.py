"""What every clusterdeck process does the same way: logging, its broker connection with
presence and last will, waiting for a signal, and what changes inside a PyInstaller bundle.
"""
