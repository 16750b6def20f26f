import type { CloudProvider, LaunchRequest } from "./cloud-provider";
import type { StreamingCredentialVault } from "../domain/streaming-credentials";

/**
 * Every launch gets the instance's own streaming-host credentials, generated and stored (sealed) by the
 * vault before the instance exists, so the sessions service is their only holder besides the host itself.
 */
export function withStreamingCredentials(
  cloud: CloudProvider,
  vault: StreamingCredentialVault,
): CloudProvider {
  return Object.assign(Object.create(cloud) as CloudProvider, {
    async launchInstance(request: LaunchRequest) {
      const streamingCredentials = await vault.issue(request.sessionId);
      return cloud.launchInstance({ ...request, streamingCredentials });
    },
  });
}
