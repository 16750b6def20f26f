import type { Command } from "commander";
import { createContext, type CliContext, type GlobalOptions } from "../cli-context";

/** Wraps a command's action so it receives the context built from the global options. */
export function action<A extends unknown[]>(
  run: (ctx: CliContext, ...args: A) => Promise<void>,
): (...args: unknown[]) => Promise<void> {
  return async (...args: unknown[]) => {
    const command = args[args.length - 1] as Command;
    const ctx = createContext(command.optsWithGlobals<GlobalOptions>());
    await run(ctx, ...(args.slice(0, -1) as A));
  };
}
