"""Building blocks several apps share: problems and refusals, text rules, retry, bulk SQL, files."""
