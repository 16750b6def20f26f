import { loadOpenApiDocument, type OpenApiDocument } from "@cgs/shared";
import { preferencesFields, topupBounds } from "./preferences-form";

const doc = loadOpenApiDocument();

describe("the settings form built from the contract", () => {
  it("when the contract lists the preferences, then every one is a labelled control with its enum or bounds", () => {
    const html = preferencesFields(doc);
    const patch = (
      doc as { components: { schemas: Record<string, { properties: Record<string, unknown> }> } }
    ).components.schemas.PreferencesPatch!;
    for (const key of Object.keys(patch.properties)) {
      expect(html).toContain(`<label for="pref-${key}">`);
      expect(html).toContain(`data-field="${key}"`);
    }
    expect(html).toMatch(
      /<select id="pref-fps"[^>]*data-type="integer"[^>]*>.*<option value="30">30<\/option>/,
    );
    expect(html).toMatch(/<input type="number" id="pref-bitrateKbps"[^>]*min="2000" max="100000" step="1"/);
    expect(html).toContain('<label for="pref-region">Preferred region for new sessions</label>');
    // The region is chosen from the configured regions, which the page lists: the markup offers auto only.
    expect(html).toMatch(
      /<select id="pref-region"[^>]*data-options="regions"[^>]*><option value="auto">Nearest \(auto\)<\/option><\/select>/,
    );
  });

  it("when a field is removed from or added to the contract, then the form follows without a code change", () => {
    const changed = structuredClone(doc) as OpenApiDocument & {
      components: { schemas: Record<string, { properties: Record<string, unknown> }> };
    };
    const props = changed.components.schemas.PreferencesPatch!.properties;
    delete props.lowBalanceEmail;
    props.hdr = { type: "boolean", description: "Stream in HDR when the display supports it." };
    const html = preferencesFields(changed);
    expect(html).not.toContain("lowBalanceEmail");
    expect(html).toMatch(/<input type="checkbox" id="pref-hdr"[^>]*data-type="boolean"/);
    expect(html).toContain('<label for="pref-hdr">Stream in HDR when the display supports it</label>');
  });

  it("when the top-up page asks for the bounds, then they are the contract's TopupRequest amount bounds", () => {
    expect(topupBounds(doc)).toEqual({ min: 500, max: 50000 });
  });
});
