/**
 * `/settings`: the form is rendered on the server from the contract's Preferences schema; this script
 * fills it, checks each field against the bounds the markup carries, and PATCHes only what changed.
 */
import { api, byId, say } from "./api.js";
import "./layout.js";
import { listRegions } from "./regions.js";

type Value = string | number | boolean;
type Preferences = Record<string, Value>;

const form = byId<HTMLFormElement>("settings-form");
const message = byId("settings-message");
const save = byId<HTMLButtonElement>("settings-save");
const controls = [...form.querySelectorAll<HTMLInputElement | HTMLSelectElement>("[data-field]")];
let saved: Preferences = {};

function valueOf(control: HTMLInputElement | HTMLSelectElement): Value {
  const type = control.dataset.type;
  if (control instanceof HTMLInputElement && control.type === "checkbox") return control.checked;
  if (type === "integer" || type === "number") return Number(control.value);
  return control.value;
}

function fill(prefs: Preferences): void {
  saved = prefs;
  for (const control of controls) {
    const value = prefs[control.dataset.field!];
    if (value === undefined) continue;
    if (control instanceof HTMLInputElement && control.type === "checkbox") control.checked = value === true;
    else control.value = String(value);
  }
}

function fieldError(control: HTMLInputElement | HTMLSelectElement, text: string): void {
  const slot = byId(`${control.id}-error`);
  slot.textContent = text;
  if (text) control.setAttribute("aria-invalid", "true");
  else control.removeAttribute("aria-invalid");
}

function check(control: HTMLInputElement | HTMLSelectElement): boolean {
  if (control.checkValidity()) {
    fieldError(control, "");
    return true;
  }
  const v = control.validity;
  const input = control as HTMLInputElement;
  const text = v.valueMissing
    ? "Required."
    : v.rangeUnderflow || v.rangeOverflow
      ? `Enter a value from ${input.min} to ${input.max}.`
      : v.stepMismatch
        ? "Enter a whole number."
        : v.patternMismatch || v.tooShort || v.tooLong
          ? (control.dataset.hint ?? "This value is not in the expected format.")
          : control.validationMessage;
  fieldError(control, text);
  return false;
}

for (const control of controls) control.addEventListener("change", () => check(control));

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const invalid = controls.filter((c) => !check(c));
  if (invalid.length > 0) {
    invalid[0]!.focus();
    say(message, "Fix the highlighted field before saving.", "error");
    return;
  }
  const patch: Preferences = {};
  for (const control of controls) {
    const value = valueOf(control);
    if (value !== saved[control.dataset.field!]) patch[control.dataset.field!] = value;
  }
  if (Object.keys(patch).length === 0) {
    say(message, "Nothing changed.", "info");
    return;
  }
  save.disabled = true;
  const res = await api<Preferences>("PATCH", "/settings", patch);
  save.disabled = false;
  if (res.ok) {
    fill(res.body);
    say(message, "Preferences saved. New sessions use them.", "success");
    return;
  }
  // VALIDATION_ERROR names the field (e.g. "preferences.fps"): show it next to that field.
  const named = controls.find((c) => new RegExp(`\\b${c.dataset.field}\\b`).test(res.failure.message));
  if (res.failure.error === "VALIDATION_ERROR" && named) {
    fieldError(named, res.failure.message);
    named.focus();
    say(message, "Fix the highlighted field before saving.", "error");
  } else {
    say(message, res.failure.message, "error");
  }
});

/** The region select offers "Nearest (auto)" and every configured region, by name. */
async function loadRegionOptions(): Promise<void> {
  const selects = controls.filter(
    (c): c is HTMLSelectElement => c instanceof HTMLSelectElement && c.dataset.options === "regions",
  );
  if (selects.length === 0) return;
  const listed = await listRegions();
  for (const select of selects) {
    if (listed.ok) select.append(...listed.regions.map((r) => new Option(r.name, r.id)));
    else fieldError(select, "The regions could not be loaded; only Nearest (auto) is offered.");
  }
}

/** A saved region the service no longer offers stays visible, so saving other fields does not change it. */
function keepSavedRegion(prefs: Preferences): void {
  for (const control of controls) {
    if (!(control instanceof HTMLSelectElement) || control.dataset.options !== "regions") continue;
    const value = String(prefs[control.dataset.field!] ?? "");
    if (value && ![...control.options].some((o) => o.value === value)) {
      control.append(new Option(`${value} (not offered now)`, value));
    }
  }
}

void Promise.all([api<Preferences>("GET", "/settings"), loadRegionOptions()]).then(([res]) => {
  if (res.ok) {
    keepSavedRegion(res.body);
    fill(res.body);
    save.disabled = false;
  } else say(message, "Your preferences could not be loaded.", "error");
});
