"""Date and time formats that replace the locale's: every time is UTC and 24-hour."""
