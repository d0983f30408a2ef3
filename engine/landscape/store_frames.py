"""DataFrames of the store's query results (engine/landscape/store.py `query`), made from
their Arrow tables. No DuckDB here: store.py runs the queries."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd

# `Store.query` reads a result as Arrow after `execute` (`con.sql` refuses a connection whose
# last result was not fetched to its end, as `stats` leaves it): the copy DuckDB warns of is
# counted in frame_from_arrow's figures.
warnings.filterwarnings(
    "ignore", message="Arrow output on a DB-API result makes an extra copy", category=UserWarning
)


def frame_from_arrow(table: pa.Table) -> pd.DataFrame | None:
    """The DataFrame DuckDB's `.df()` gives for a result, made from its Arrow table: pandas
    builds text columns from Arrow several times faster than from DuckDB's Python strings
    (InceptionV4's 483,255 runs, the dashboard's columns: 1.2-2.1 s -> 0.2-0.5 s). As `.df()`
    does: 64-bit integers with a NULL become nullable Int64, a text column of NULLs only
    (or of no rows) holds objects. None for a column of any type but the store's (text, 64-bit
    integers, doubles, timestamps without a zone) or a name given twice: `.df()` converts those
    its own way.
    tests/test_store.py holds the two equal, dtypes included."""
    import pandas as pd

    if len(set(table.column_names)) < table.num_columns:
        return None  # .df() renames a repeated name (peak, peak_1)
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        kind = field.type
        if pa.types.is_int64(kind) and column.null_count:
            series = column.to_pandas(types_mapper={kind: pd.Int64Dtype()}.get)
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            if column.null_count == len(column):
                series = pd.Series([None] * len(column), dtype=object)
            else:
                series = column.to_pandas()
        elif (
            pa.types.is_int64(kind)
            or pa.types.is_float64(kind)
            or (pa.types.is_timestamp(kind) and kind.tz is None)
        ):
            series = column.to_pandas()
        else:
            return None
        columns.append(series.rename(field.name))
    if not columns:
        return None
    return pd.concat(columns, axis=1)
