"""Settings for the test suite: the production settings with the development key allowed."""

import os

os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
