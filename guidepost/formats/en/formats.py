"""English's formats, but for times: UTC and 24-hour, as the pages write them, where
Django's own would write "Dec. 7, 2026, 11:50 a.m." in the admin."""

DATETIME_FORMAT = r"Y-m-d H:i:s \U\T\C"
SHORT_DATETIME_FORMAT = r"Y-m-d H:i \U\T\C"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
