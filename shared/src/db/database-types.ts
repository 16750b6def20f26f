import type { ExtractTablesWithRelations, TablesRelationalConfig } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from "drizzle-orm/pg-core";

export type DatabaseSchema = Record<string, unknown>;

export interface RowsResult<TRow> {
  rows: TRow[];
}

/** What `execute()` resolves to on both drivers: at least the rows (pg's QueryResult and PGlite's Results both have them). */
export interface RowsQueryResultHKT extends PgQueryResultHKT {
  type: RowsResult<this["row"]>;
}

/** A Drizzle database over either node-postgres or PGlite; both share the pg-core query builder. */
export type Database<TSchema extends DatabaseSchema = DatabaseSchema> = PgDatabase<
  RowsQueryResultHKT,
  TSchema
>;

export type Transaction<TSchema extends DatabaseSchema = DatabaseSchema> = PgTransaction<
  RowsQueryResultHKT,
  TSchema,
  ExtractTablesWithRelations<TSchema>
>;

/** Anything that runs queries: a database or a transaction of any schema. */
export type SqlExecutor =
  | PgDatabase<PgQueryResultHKT, DatabaseSchema, TablesRelationalConfig>
  | PgTransaction<PgQueryResultHKT, DatabaseSchema, TablesRelationalConfig>;

export type DatabaseKind = "postgres" | "pglite";
