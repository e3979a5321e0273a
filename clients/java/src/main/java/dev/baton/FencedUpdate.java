package dev.baton;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.List;

/**
 * FencedUpdate is a fenced UPDATE, as Go's fence.Update: it makes the
 * assignments set to the rows where selects and records the caller's token
 * in the fence column, only where the stored fence is lower than or equal
 * to the token, in one statement:
 *
 * <pre>UPDATE table SET set, fence = ? WHERE (where) AND fence &lt;= ?</pre>
 *
 * The database decides, row by row and atomically with the write, so a
 * holder whose lock passed to a newer holder that wrote cannot write after
 * it. The fence column is a BIGINT NOT NULL DEFAULT 0 of the fenced rows.
 * The placeholders are JDBC's ({@code ?}): setArgs fill set's, whereArgs
 * where's.
 */
public record FencedUpdate(String table, String set, List<Object> setArgs, String where, List<Object> whereArgs,
        String fenceColumn) {

    /** A fenced update with the fence column "fence". */
    public FencedUpdate(String table, String set, List<Object> setArgs, String where, List<Object> whereArgs) {
        this(table, set, setArgs, where, whereArgs, "fence");
    }

    /** sql is the statement: the assignments, the fence's, then the rows and the fence's check. */
    public String sql() {
        if (table.isEmpty() || set.isEmpty() || where.isEmpty()) {
            throw new InvalidArgumentException(3, "", "a fenced update needs a table, assignments and rows", null);
        }
        return "UPDATE " + table + " SET " + set + ", " + fenceColumn + " = ? WHERE (" + where + ") AND "
                + fenceColumn + " <= ?";
    }

    /**
     * execute runs the update on c under lease's token and reports whether it
     * applied: false when no selected row has a fence lower than or equal to
     * the token, that is when a newer holder wrote (or no row matches).
     */
    public boolean execute(Connection c, Lease lease) throws SQLException {
        long token = Fencing.checked(lease.token());
        try (PreparedStatement ps = c.prepareStatement(sql())) {
            int i = 1;
            for (Object a : setArgs) {
                ps.setObject(i++, a);
            }
            ps.setLong(i++, token);
            for (Object a : whereArgs) {
                ps.setObject(i++, a);
            }
            ps.setLong(i, token);
            return ps.executeUpdate() > 0;
        }
    }
}
