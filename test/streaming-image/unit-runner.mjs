#!/usr/bin/env node
// A small stand-in for systemd, for the boot test: there is no systemd to boot here, so this starts the image's
// units the way systemd would order them (After=, Requires=), with their Environment=, EnvironmentFile=, User=,
// Group=, ExecStartPre=, ExecStart= and ExecStartPost=, and Type=oneshot or simple. It runs inside the test's
// network and mount namespace, so every process it starts shares the account volume's mount.
//
//   node unit-runner.mjs SPEC.json
// SPEC: { units: [{ name, text }], rewrite: [[from, to]], users: {name: mapped}, groups: {name: mapped},
//         env: {...}, events: path }
// Prints one JSON line {units: {name: state}} once every unit has started or failed, then keeps the services
// running until its standard input closes, when it stops them.
import { spawn } from "node:child_process";
import * as fs from "node:fs";

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const event = (line) => fs.appendFileSync(spec.events, `runner ${line}\n`);

function rewrite(text) {
  return spec.rewrite.reduce((t, [from, to]) => t.split(from).join(to), text);
}

/** INI sections of a unit (and its drop-ins, concatenated): key -> every value, in order. */
function parseUnit(text) {
  const keys = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith("[")) continue;
    const eq = line.indexOf("=");
    const key = line.slice(0, eq);
    (keys[key] ??= []).push(line.slice(eq + 1));
  }
  const words = (key) => (keys[key] ?? []).flatMap((v) => v.split(/\s+/).filter(Boolean));
  return { keys, words, one: (key) => keys[key]?.at(-1) };
}

function envFor(unit) {
  const env = { ...process.env, ...spec.env };
  for (const entry of unit.keys.EnvironmentFile ?? []) {
    const optional = entry.startsWith("-");
    const file = optional ? entry.slice(1) : entry;
    if (!fs.existsSync(file)) {
      if (optional) continue;
      throw new Error(`EnvironmentFile ${file} is missing`);
    }
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
      const eq = line.indexOf("=");
      if (eq > 0 && !line.startsWith("#")) env[line.slice(0, eq)] = line.slice(eq + 1);
    }
  }
  for (const assignment of unit.words("Environment")) {
    const eq = assignment.indexOf("=");
    env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
  }
  return env;
}

/** The command line, run as the unit's (mapped) user and group through setpriv. */
function argv(unit, command) {
  const words = command.split(/\s+/).filter(Boolean);
  const user = unit.one("User");
  if (!user) return words;
  const group = unit.one("Group") ?? user;
  return [
    "setpriv",
    `--reuid=${spec.users[user] ?? user}`,
    `--regid=${spec.groups[group] ?? group}`,
    "--init-groups",
    ...words,
  ];
}

function runToEnd(unit, command, env) {
  const [file, ...args] = argv(unit, command);
  const out = fs.openSync(spec.events.replace(/\.log$/, ".output"), "a");
  fs.writeSync(out, `$ ${command}\n`);
  const child = spawn(file, args, { env, stdio: ["ignore", out, out] });
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.on("error", () => resolve(false));
    child.on("exit", (code) => {
      clearTimeout(timer);
      fs.closeSync(out);
      resolve(code === 0);
    });
  });
}

const parsed = new Map(spec.units.map((u) => [u.name, parseUnit(rewrite(u.text))]));
const names = spec.units.map((u) => u.name);
const states = {};
const running = [];

// As systemd does, a unit starts as soon as the units of this boot it names in After= have settled, and is not
// started when one of those it also Requires= did not become active; units with no ordering start together.
const jobs = new Map();
function job(name, path = []) {
  if (path.includes(name)) throw new Error(`ordering cycle: ${[...path, name].join(" -> ")}`);
  if (!jobs.has(name)) jobs.set(name, activate(name, path));
  return jobs.get(name);
}

async function activate(name, path) {
  const unit = parsed.get(name);
  const after = unit.words("After").filter((n) => names.includes(n));
  await Promise.all(after.map((n) => job(n, [...path, name])));
  const failedDependency = unit.words("Requires").find((r) => after.includes(r) && states[r] !== "active");
  if (failedDependency) {
    states[name] = "dependency-failed";
    event(`skip ${name} (requires ${failedDependency})`);
    return;
  }
  event(`start ${name}`);
  let ok = true;
  try {
    const env = envFor(unit);
    for (const pre of unit.keys.ExecStartPre ?? []) ok &&= await runToEnd(unit, pre, env);
    if (ok && (unit.one("Type") ?? "simple") === "oneshot") {
      for (const command of unit.keys.ExecStart ?? []) ok &&= await runToEnd(unit, command, env);
    } else if (ok) {
      const [file, ...args] = argv(unit, unit.one("ExecStart"));
      const out = fs.openSync(spec.events.replace(/\.log$/, ".output"), "a");
      const child = spawn(file, args, { env, detached: true, stdio: ["ignore", out, out] });
      running.push(child);
      for (const post of unit.keys.ExecStartPost ?? []) ok &&= await runToEnd(unit, post, env);
      if (child.exitCode !== null) ok = false;
    }
  } catch (err) {
    fs.appendFileSync(spec.events.replace(/\.log$/, ".output"), `${name}: ${err.message}\n`);
    ok = false;
  }
  states[name] = ok ? "active" : "failed";
  event(`${states[name]} ${name}`);
}

await Promise.all(names.map((n) => job(n)));
process.stdout.write(`${JSON.stringify({ units: Object.fromEntries(names.map((n) => [n, states[n]])) })}\n`);

const stopAll = () => {
  for (const child of running) {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  setTimeout(() => {
    for (const child of running) {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    process.exit(0);
  }, 1_000);
};
process.stdin.on("end", stopAll);
process.stdin.resume();
process.on("SIGTERM", stopAll);
