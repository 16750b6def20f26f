import type { Logger } from "pino";

/** The part of a pino logger the data and messaging components use; any pino logger fits. */
export type ComponentLogger = Pick<Logger, "debug" | "info" | "warn" | "error">;

const noop = (): void => undefined;

export const silentLogger: ComponentLogger = { debug: noop, info: noop, warn: noop, error: noop };
