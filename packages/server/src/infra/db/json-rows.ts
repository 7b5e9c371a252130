import { type InsertQueryBuilder, type InsertResult, type QueryCreator, sql } from 'kysely';

/**
 * An insert of many whole rows of `table`, given as one JSON array of objects shaped as the table's
 * row type (every column, dates as ISO strings), through `jsonb_populate_recordset`. The statement's
 * text is the same for any number of rows, so it is prepared once per connection (decision 217) where
 * a list of `values` would make a text, a parse and a plan per batch size (decision 256).
 */
export function insertJsonRows<DB, T extends keyof DB & string>(
  qc: QueryCreator<DB>,
  table: T,
  rowsJson: string,
): InsertQueryBuilder<DB, T, InsertResult> {
  return qc.insertInto(table).expression(sql`select * from jsonb_populate_recordset(null::${sql.table(table)}, ${rowsJson}::jsonb)`);
}
