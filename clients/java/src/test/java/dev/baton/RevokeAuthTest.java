package dev.baton;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * With authentication on, a revoke needs admin over the lock's name: a
 * user who may only lock and read is refused (and its hold is not
 * touched), root is not. A member of its own, since authentication
 * changes every other test's calls.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RevokeAuthTest {
    private static final Duration TTL = Duration.ofSeconds(60);
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static TestCluster cluster;
    private static String rootToken;
    private static String aliceToken;

    @BeforeAll
    static void start() throws Exception {
        cluster = TestCluster.start(1);
        String addr = cluster.leaderAddr();
        rootToken = auth(addr, "{\"kind\":\"ADD_USER\",\"user\":\"root\",\"with_token\":true}").path("token").asText();
        auth(addr, "{\"kind\":\"GRANT_ROLE\",\"user\":\"root\",\"role\":\"root\"}");
        auth(addr, "{\"kind\":\"ADD_ROLE\",\"role\":\"jobs\"}");
        auth(addr, "{\"kind\":\"GRANT\",\"role\":\"jobs\",\"prefix\":\"jobs/\",\"perms\":\"lock,read\"}");
        aliceToken = auth(addr, "{\"kind\":\"ADD_USER\",\"user\":\"alice\",\"with_token\":true}").path("token").asText();
        auth(addr, "{\"kind\":\"GRANT_ROLE\",\"user\":\"alice\",\"role\":\"jobs\"}");
        auth(addr, "{\"kind\":\"ENABLE\"}");
    }

    private static JsonNode auth(String addr, String change) throws Exception {
        return TestCluster.post(addr, "/v1/auth", change);
    }

    @AfterAll
    static void stop() throws Exception {
        cluster.close();
    }

    @Test
    void aRevokeNeedsAdminOverTheName() throws Exception {
        String name = "jobs/revoke";
        try (BatonClient alice = BatonClient.builder().endpoints(cluster.endpoints()).bearerToken(aliceToken).build();
                BatonClient root = BatonClient.builder().endpoints(cluster.endpoints()).bearerToken(rootToken).build();
                Session s = alice.newSession(TTL);
                Lease held = s.mutex(name).lock(WAIT)) {
            PermissionDeniedException e = assertThrows(PermissionDeniedException.class, () -> alice.revokeLock(name));
            assertTrue(e.getMessage().contains("admin"), e.getMessage());
            assertTrue(held.revocation().isEmpty());

            List<Revocation> revs = root.revokeLock(name, Duration.ofSeconds(40));
            assertEquals(1, revs.size(), revs.toString());
            assertEquals(Duration.ofSeconds(40), revs.get(0).grace(), "the refused revoke took effect");
            assertEquals(revs.get(0), held.revokeRequested().get(WAIT.toMillis(), TimeUnit.MILLISECONDS));
        }
    }
}
