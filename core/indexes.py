"""Indexes made for the job."""

from django.db import models


class AppendOrderIndex(models.Index):
    """An index of a column whose values grow with the rows' insertion (a time of writing, the
    id of the call that wrote them) in a table only ever appended to: a BRIN index on
    PostgreSQL, which keeps each block range's smallest and largest value, costs next to nothing
    to maintain when thousands of rows are written at once and still narrows a range or an
    equality to the few blocks that hold it; an ordinary index elsewhere.

    It answers no ORDER BY: a question that needs the rows in this column's order takes them
    from another index or sorts them."""

    def create_sql(self, model, schema_editor, using="", **kwargs):
        if schema_editor.connection.vendor == "postgresql":
            using = " USING brin"
        return super().create_sql(model, schema_editor, using=using, **kwargs)
