import type { OpenApiDocument } from "@cgs/shared";
import { escapeHtml } from "./portal-pages";

/** Markup for the preferences form, built from the contract so a field added or removed there follows here. */

interface JsonSchema {
  $ref?: string;
  type?: string;
  enum?: (string | number)[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  description?: string;
  example?: unknown;
  properties?: Record<string, JsonSchema>;
}

function schemas(doc: OpenApiDocument): Record<string, JsonSchema> {
  return ((doc as { components?: { schemas?: Record<string, JsonSchema> } }).components?.schemas ??
    {}) as Record<string, JsonSchema>;
}

function resolve(doc: OpenApiDocument, schema: JsonSchema): JsonSchema {
  const name = schema.$ref?.replace("#/components/schemas/", "");
  return name ? (schemas(doc)[name] ?? schema) : schema;
}

/** "Stream resolution, width x height in pixels." → label "Stream resolution", hint "Width x height in pixels." */
function describe(key: string, description: string | undefined): { label: string; hint: string } {
  const text = (description ?? "").replace(/`/g, "").trim();
  const label = text.split(/[,.] /)[0]!.replace(/\.$/, "").trim() || key;
  const rest = text
    .slice(label.length)
    .replace(/^[,.]\s*/, "")
    .trim();
  return { label, hint: rest && rest[0]!.toUpperCase() + rest.slice(1) };
}

function control(key: string, schema: JsonSchema): string {
  const id = `pref-${key}`;
  const type = schema.type ?? "string";
  const common = `id="${id}" name="${escapeHtml(key)}" data-field="${escapeHtml(key)}" data-type="${escapeHtml(type)}" aria-describedby="${id}-hint ${id}-error"`;
  // The regions are config, not contract: the page adds one option per region from GET /api/v1/regions.
  if (key === "region") {
    return `<select ${common} data-options="regions" required><option value="auto">Nearest (auto)</option></select>`;
  }
  if (schema.enum) {
    const options = schema.enum
      .map((v) => `<option value="${escapeHtml(String(v))}">${escapeHtml(String(v))}</option>`)
      .join("");
    return `<select ${common} required>${options}</select>`;
  }
  if (type === "boolean") return `<input type="checkbox" ${common}>`;
  if (type === "integer" || type === "number") {
    const bounds = [
      schema.minimum !== undefined ? `min="${schema.minimum}"` : "",
      schema.maximum !== undefined ? `max="${schema.maximum}"` : "",
      type === "integer" ? `step="1" inputmode="numeric"` : `step="any" inputmode="decimal"`,
    ]
      .filter(Boolean)
      .join(" ");
    return `<input type="number" ${common} ${bounds} required>`;
  }
  const rules = [
    schema.minLength !== undefined ? `minlength="${schema.minLength}"` : "",
    schema.maxLength !== undefined ? `maxlength="${schema.maxLength}"` : "",
    schema.pattern ? `pattern="${escapeHtml(schema.pattern.replace(/^\^|\$$/g, ""))}"` : "",
    schema.description ? `data-hint="${escapeHtml(describe(key, schema.description).hint)}"` : "",
  ]
    .filter(Boolean)
    .join(" ");
  return `<input type="text" ${common} ${rules} autocomplete="off" spellcheck="false" required>`;
}

/** One labelled control per property of PreferencesPatch (what PATCH /api/v1/settings accepts). */
export function preferencesFields(doc: OpenApiDocument): string {
  const all = schemas(doc);
  const patch = all.PreferencesPatch ?? all.Preferences;
  const properties = patch?.properties ?? {};
  return Object.entries(properties)
    .map(([key, raw]) => {
      const schema = resolve(doc, raw);
      const id = `pref-${key}`;
      // The contract describes the region's ids for API clients; the select shows names and explains auto.
      const { label, hint } =
        key === "region"
          ? {
              label: "Preferred region for new sessions",
              hint: "Nearest (auto): the device that starts a session measures every region and starts in the nearest.",
            }
          : describe(key, schema.description);
      const hintHtml = `<p id="${id}-hint" class="hint">${escapeHtml(hint)}</p>`;
      const errorHtml = `<p id="${id}-error" class="field-error" aria-live="polite"></p>`;
      if (schema.type === "boolean" && !schema.enum) {
        return `<div class="field checkbox">${control(key, schema)}<label for="${id}">${escapeHtml(label)}</label>${hintHtml}${errorHtml}</div>`;
      }
      return `<div class="field"><label for="${id}">${escapeHtml(label)}</label>${control(key, schema)}${hintHtml}${errorHtml}</div>`;
    })
    .join("\n");
}

/** The top-up amount's bounds from TopupRequest, in minor units. */
export function topupBounds(doc: OpenApiDocument): { min: number; max: number } {
  const amount = resolve(doc, schemas(doc).TopupRequest?.properties?.amount ?? {});
  return { min: amount.minimum ?? 1, max: amount.maximum ?? Number.MAX_SAFE_INTEGER };
}
