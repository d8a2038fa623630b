import { z } from "zod";

export default z.object({
  draft: z.string().min(1).describe("The reply to send"),
  offersRefund: z.boolean(),
});
