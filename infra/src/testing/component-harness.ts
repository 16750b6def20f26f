import * as pulumi from "@pulumi/pulumi";
import {
  computedState,
  readStackConfig,
  regionOfResource,
  TEST_SECRETS,
  type RecordedResource,
} from "./stack-harness";

/** Test support: builds one component alone under Pulumi mocks, from the staging stack's values. */

/** Mocks the engine for this test file; returns the list every registered resource is added to. */
export async function mockResources(): Promise<RecordedResource[]> {
  const resources: RecordedResource[] = [];
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        const inputs = args.inputs as Record<string, unknown>;
        const region = regionOfResource(args, "eu-west-1");
        resources.push({ type: args.type, name: args.name, inputs, region });
        return {
          id: `${args.name}-id`,
          state: { ...inputs, ...computedState(args.type, args.name, inputs, region) },
        };
      },
      call: (args) => args.inputs,
    },
    "cloud-gaming-platform",
    "component-test",
    false,
  );
  return resources;
}

/** A fresh copy of the staging stack's value of `cgs:<key>`: the known-good value a test breaks one field of. */
export function stagingValue<T>(key: string): T {
  const value = readStackConfig("staging")[`cgs:${key}`];
  if (value === undefined) throw new Error(`Pulumi.staging.yaml has no cgs:${key}`);
  // Not structuredClone: its arrays belong to another realm than jest's, and Pulumi would send them as objects.
  return JSON.parse(JSON.stringify(value)) as T;
}

/** Sets the whole stack configuration: staging's, with `overrides` on top (undefined removes a key). */
export function useStagingConfigWith(overrides: Record<string, unknown>): void {
  const merged: Record<string, unknown> = { ...readStackConfig("staging"), ...TEST_SECRETS, ...overrides };
  const all: Record<string, string> = {};
  for (const [k, v] of Object.entries(merged)) {
    if (v !== undefined) all[k] = typeof v === "string" ? v : JSON.stringify(v);
  }
  pulumi.runtime.setAllConfig(all, Object.keys(TEST_SECRETS));
}

/** Waits until every resource created so far has been registered (registration runs asynchronously). */
export async function settled(): Promise<void> {
  const settings = jest.requireActual<{ waitForRPCs(): Promise<void> }>("@pulumi/pulumi/runtime/settings");
  await settings.waitForRPCs();
}
