import { InvalidArgumentError, type Command } from "commander";
import type { MeasuredRegion } from "@cgs/sdk";
import { emit, note } from "../terminal-output";
import { action } from "./command-action";

// The contract's region id (StartSessionRequest.regions' items).
const REGION_ID = /^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$/;
const MAX_REGIONS = 16;

export const regionOrAuto = (value: string) => {
  if (value === "auto" || REGION_ID.test(value)) return value;
  throw new InvalidArgumentError("must be a region id such as eu-west-1 (see `cgs regions`), or auto");
};

export const regionList = (value: string) => {
  const ids = value.split(",").map((id) => id.trim());
  const bad = ids.find((id) => !REGION_ID.test(id));
  if (bad !== undefined)
    throw new InvalidArgumentError(
      `${bad === "" ? "an empty entry" : `"${bad}"`} is not a region id such as eu-west-1 (comma-separated, no auto)`,
    );
  const repeated = ids.find((id, i) => ids.indexOf(id) !== i);
  if (repeated) throw new InvalidArgumentError(`${repeated} is listed twice`);
  if (ids.length > MAX_REGIONS) throw new InvalidArgumentError(`at most ${MAX_REGIONS} regions`);
  return ids;
};

export const wholeNumberIn = (min: number, max: number, unit: string) => (value: string) => {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n < min || n > max)
    throw new InvalidArgumentError(`must be a whole number of ${unit} from ${min} to ${max}`);
  return n;
};

export const rttText = (r: MeasuredRegion) => (r.rttMs === null ? "unreachable" : `${Math.round(r.rttMs)}`);

/** The measured regions as the table `cgs regions` prints, nearest first. */
export function regionTable(measured: MeasuredRegion[]): string {
  const rows = [
    ["REGION", "NAME", "RTT ms (median)", "AVAILABLE", "QUEUE"],
    ...measured.map((r) => [r.id, r.name, rttText(r), r.available ? "yes" : "no", String(r.queueLength)]),
  ];
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((row) => row[col]!.length)));
  // Numbers right-aligned under their headings, words left-aligned.
  const right = [false, false, true, false, true];
  return rows
    .map((row) =>
      row
        .map((cell, col) => (right[col] ? cell.padStart(widths[col]!) : cell.padEnd(widths[col]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** One line for stderr: what a measurement found, nearest first. */
export const measuredSummary = (measured: MeasuredRegion[]) =>
  measured.map((r) => `${r.id} ${r.rttMs === null ? "unreachable" : `${Math.round(r.rttMs)} ms`}`).join(", ");

export function regionCommands(program: Command): void {
  program
    .command("regions")
    .description(
      "Measure your round trip to every region (the median of a few probes of its beacon) and list them, nearest first",
    )
    .option(
      "--samples <n>",
      "round trips counted per region, after one warm-up",
      wholeNumberIn(1, 20, "round trips"),
      5,
    )
    .action(
      action(async (ctx, opts: { samples: number }) => {
        note("Measuring your round trip to each region…");
        const measured = await ctx.client().regions.measure({ samples: opts.samples });
        emit(ctx.options.json, measured, () =>
          [
            regionTable(measured),
            measured.some((r) => r.rttMs !== null)
              ? "\nStart in the nearest with `cgs session start --region auto`, or make it the default with `cgs settings set region=auto`."
              : "\nNo beacon answered: check your connection, or start in a named region with `cgs session start --region ID`.",
          ].join("\n"),
        );
      }),
    );
}
