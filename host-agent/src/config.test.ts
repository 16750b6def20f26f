import { readFileSync } from "node:fs";
import path from "node:path";
import { agentConfigSchema } from "./config";

describe("the host agent's configuration", () => {
  it("when its README is read, then every variable the agent reads is documented there", () => {
    const readme = readFileSync(path.join(__dirname, "..", "README.md"), "utf8");
    for (const name of Object.keys(agentConfigSchema.innerType().shape))
      expect(readme).toContain(`\`${name}\``);
  });
});
