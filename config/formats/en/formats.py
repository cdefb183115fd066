# One time format everywhere in the admin: seconds (several sync events share a minute) and
# the zone (TIME_ZONE) shown. Django reads these instead of the "en" locale's own formats.
DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
