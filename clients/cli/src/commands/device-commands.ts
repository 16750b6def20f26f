import type { Command } from "commander";
import { emit } from "../terminal-output";
import { action } from "./command-action";

const when = (iso: string | null) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "never");

export function deviceCommands(program: Command): void {
  const devices = program
    .command("devices")
    .description("The streaming devices paired with your machine (they stay paired across sessions)")
    .action(
      action(async (ctx) => {
        const list = await ctx.client().devices.list();
        emit(ctx.options.json, list, () =>
          list.length === 0
            ? "No paired devices. Pair one with `cgs session pair` while a session runs."
            : [
                "ID                                    NAME                  PAIRED                LAST USED",
                ...list.map(
                  (d) =>
                    `${d.id}  ${d.name.padEnd(20).slice(0, 20)}  ${when(d.pairedAt)}  ${when(d.lastUsedAt)}`,
                ),
              ].join("\n"),
        );
      }),
    );
  devices
    .command("remove")
    .description("Unpair a device (now if a session runs, otherwise when the next one starts)")
    .argument("<id>", "the device's id, from `cgs devices`")
    .action(
      action(async (ctx, id: string) => {
        await ctx.client().devices.remove(id);
        emit(ctx.options.json, { removed: id }, () => `Unpaired ${id}.`);
      }),
    );
}
