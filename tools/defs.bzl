"""table_rules: many targets of one kind stated as one table (tests/BUILD;
tools/bench/BUILD may use it too)."""

def table_rules(rule, rows):
    """Calls rule(name = name, **attrs) for each (name, attrs) row of rows.

    A BUILD file that lists many targets of one macro (a test per feature, a
    benchmark per program) states them as rows, each with its comment, instead
    of a call of the same shape per target.
    """
    for name, attrs in rows:
        rule(name = name, **attrs)
