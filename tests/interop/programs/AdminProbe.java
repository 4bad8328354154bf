// Kafka's Java AdminClient against the project's cluster, at its defaults: one JVM, many calls.
//
// java -cp <kafka-clients jars> AdminProbe.java <client.properties> <admin|acls>
//
// Each step's outcome goes into one JSON object printed on the last line of stdout:
// {"step": {"ok": true, "value": ...}} or {"step": {"ok": false, "error": "ExceptionClass: message"}}.
// A failing step does not stop the others; the Python test asserts on each.

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileReader;
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringSerializer;

public class AdminProbe {
    interface Step {
        Object run() throws Exception;
    }

    static final Map<String, Object> OUT = new LinkedHashMap<>();
    static final long DEADLINE_MS = 30_000;
    static Properties props;
    static Admin admin;

    static void step(String name, Step body) {
        Map<String, Object> result = new LinkedHashMap<>();
        try {
            Object value = body.run();
            result.put("ok", true);
            result.put("value", value);
        } catch (Throwable t) {
            Throwable cause = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
            result.put("ok", false);
            result.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
        }
        OUT.put(name, result);
    }

    interface Source<T> {
        T get() throws Exception;
    }

    /**
     * Asks {@code source} until its answer satisfies {@code done}, and returns that answer (the last one
     * after the deadline). Brokers learn of changes each in its own time and any of them may answer, so
     * the probe keeps the answer it judged rather than asking again.
     */
    static <T> T until(Source<T> source, java.util.function.Predicate<T> done) throws Exception {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (true) {
            try {
                T answer = source.get();
                if (done.test(answer) || System.currentTimeMillis() > deadline) return answer;
            } catch (ExecutionException e) { // say, a broker that does not know a new topic yet
                if (System.currentTimeMillis() > deadline) throw e;
            }
            Thread.sleep(100);
        }
    }

    public static void main(String[] args) throws Exception {
        props = new Properties();
        try (FileReader reader = new FileReader(args[0])) {
            props.load(reader);
        }
        try (Admin client = Admin.create(props)) {
            admin = client;
            if (args[1].equals("acls")) {
                acls();
            } else {
                topics();
                configs();
                data();
                leadership();
                groups();
                beyond();
            }
        }
        System.out.println(new ObjectMapper().writeValueAsString(OUT));
    }

    static Map<String, Object> describe(String topic) throws Exception {
        TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        Map<String, Object> partitions = new TreeMap<>();
        for (TopicPartitionInfo info : description.partitions()) {
            Map<String, Object> p = new LinkedHashMap<>();
            p.put("leader", info.leader() == null ? -1 : info.leader().id());
            p.put("replicas", info.replicas().stream().map(Node::id).toList());
            p.put("isr", info.isr().stream().map(Node::id).toList());
            partitions.put(String.valueOf(info.partition()), p);
        }
        return partitions;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> partition(String topic, int partition) throws Exception {
        return (Map<String, Object>) describe(topic).get(String.valueOf(partition));
    }

    static Object replicas(String topic, int partition) throws Exception {
        return partition(topic, partition).get("replicas");
    }

    static Set<String> topicNames() throws Exception {
        return new TreeSet<>(admin.listTopics().names().get());
    }

    static void topics() {
        step("cluster", () -> {
            DescribeClusterResult cluster = admin.describeCluster();
            return Map.of(
                    "cluster_id", cluster.clusterId().get(),
                    "nodes", cluster.nodes().get().stream().map(Node::id).sorted().toList(),
                    "controller", cluster.controller().get().id());
        });
        step("create", () -> {
            NewTopic spread = new NewTopic("admin-a", 3, (short) 2).configs(Map.of("retention.ms", "3600000"));
            NewTopic placed = new NewTopic("admin-b", Map.of(0, List.of(1, 2), 1, List.of(2, 3)));
            NewTopic doomed = new NewTopic("admin-c", 1, (short) 1);
            admin.createTopics(List.of(spread, placed, doomed)).all().get();
            return topicNames();
        });
        step("create_again", () -> admin.createTopics(List.of(new NewTopic("admin-a", 1, (short) 1))).all().get());
        step("describe", () -> until(() -> Map.of("admin-a", describe("admin-a"), "admin-b", describe("admin-b")),
                topics -> topics.values().stream().allMatch(t -> !t.toString().contains("leader=-1"))));
        step("partitions", () -> {
            admin.createPartitions(Map.of("admin-a", NewPartitions.increaseTo(5))).all().get();
            return until(() -> describe("admin-a").size(), size -> size == 5);
        });
        step("partitions_again", () -> admin.createPartitions(Map.of("admin-a", NewPartitions.increaseTo(5))).all().get());
        step("delete", () -> {
            admin.deleteTopics(List.of("admin-c")).all().get();
            return until(AdminProbe::topicNames, names -> !names.contains("admin-c"));
        });
    }

    static Map<String, List<String>> topicConfig(String topic, String... names) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, List<String>> found = new TreeMap<>();
        for (String name : names) {
            ConfigEntry entry = config.get(name);
            found.put(name, List.of(String.valueOf(entry.value()), entry.source().name()));
        }
        return found;
    }

    static void configs() {
        step("configs_described", () -> topicConfig("admin-a", "retention.ms", "max.message.bytes"));
        step("configs_altered", () -> {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, "admin-a");
            List<AlterConfigOp> ops = List.of(
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE));
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
            return topicConfig("admin-a", "retention.ms", "max.message.bytes");
        });
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
        step("broker_configs", () -> {
            Config config = admin.describeConfigs(List.of(broker)).all().get().get(broker);
            return Map.of("broker.id", config.get("broker.id").value(), "count", config.entries().size());
        });
        step("broker_throttle_cleared", () -> alterBroker(broker, AlterConfigOp.OpType.DELETE, ""));
        step("broker_config_set", () -> alterBroker(broker, AlterConfigOp.OpType.SET, "10485760"));
    }

    static String alterBroker(ConfigResource broker, AlterConfigOp.OpType type, String value) throws Exception {
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry("leader.replication.throttled.rate", value), type);
        admin.incrementalAlterConfigs(Map.of(broker, List.of(op))).all().get();
        return type.name();
    }

    static void data() {
        TopicPartition first = new TopicPartition("admin-a", 0);
        step("produced", () -> {
            Properties producerProps = new Properties();
            producerProps.putAll(props);
            producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
                for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>("admin-a", 0, "k" + i, "v" + i)).get();
            }
            return 5;
        });
        step("offsets", () -> Map.of(
                "earliest", admin.listOffsets(Map.of(first, OffsetSpec.earliest())).partitionResult(first).get().offset(),
                "latest", admin.listOffsets(Map.of(first, OffsetSpec.latest())).partitionResult(first).get().offset()));
        step("log_dirs", () -> {
            Map<String, Object> sizes = new TreeMap<>();
            var all = admin.describeLogDirs(List.of(1, 2, 3)).allDescriptions().get();
            for (var broker : all.entrySet()) {
                for (var dir : broker.getValue().values()) {
                    var replica = dir.replicaInfos().get(first);
                    if (replica != null) sizes.put(String.valueOf(broker.getKey()), replica.size());
                }
            }
            return sizes;
        });
    }

    static void leadership() {
        TopicPartition moved = new TopicPartition("admin-b", 0);
        TopicPartition reordered = new TopicPartition("admin-b", 1);
        step("reassigned", () -> {
            admin.alterPartitionReassignments(Map.of(
                    moved, Optional.of(new NewPartitionReassignment(List.of(2, 3))),
                    reordered, Optional.of(new NewPartitionReassignment(List.of(3, 2))))).all().get();
            return until(() -> admin.listPartitionReassignments().reassignments().get().isEmpty()
                    && replicas("admin-b", 0).equals(List.of(2, 3)) && replicas("admin-b", 1).equals(List.of(3, 2)),
                    done -> done);
        });
        step("cancel_nothing", () -> admin.alterPartitionReassignments(
                Map.of(moved, Optional.<NewPartitionReassignment>empty())).all().get());
        // Brokers learn of the new leader from the controller's UpdateMetadata: the test also reads ZooKeeper.
        step("elected", () -> {
            var results = admin.electLeaders(ElectionType.PREFERRED, Set.of(reordered)).partitions().get();
            Object leader = until(() -> partition("admin-b", 1).get("leader"), id -> id.equals(3));
            return Map.of("error", String.valueOf(results.get(reordered).orElse(null)), "leader", leader);
        });
        step("elected_again", () -> admin.electLeaders(ElectionType.PREFERRED, Set.of(reordered)).all().get());
    }

    static void groups() {
        TopicPartition first = new TopicPartition("admin-a", 0);
        step("group_offsets_altered", () -> admin.alterConsumerGroupOffsets(
                "admin-group", Map.of(first, new OffsetAndMetadata(3, "probe"))).all().get());
        step("groups_listed", () -> admin.listConsumerGroups().all().get().stream()
                .map(ConsumerGroupListing::groupId).sorted().toList());
        step("group_described", () -> {
            ConsumerGroupDescription group = admin.describeConsumerGroups(List.of("admin-group"))
                    .all().get().get("admin-group");
            return Map.of("state", group.state().name(), "members", group.members().size(),
                    "coordinator", group.coordinator().id());
        });
        step("group_offsets", () -> {
            var offsets = admin.listConsumerGroupOffsets("admin-group").partitionsToOffsetAndMetadata().get();
            return Map.of("offset", offsets.get(first).offset(), "metadata", offsets.get(first).metadata());
        });
        step("group_offsets_deleted", () -> admin.deleteConsumerGroupOffsets("admin-group", Set.of(first)).all().get());
        step("group_deleted", () -> {
            admin.deleteConsumerGroups(List.of("admin-group")).all().get();
            return admin.listConsumerGroups().all().get().stream().map(ConsumerGroupListing::groupId).toList();
        });
        step("acls_without_authorizer", () -> admin.describeAcls(AclBindingFilter.ANY).values().get().size());
    }

    /** Calls beyond the brief's list that Kafka's tools make: recorded, so docs/interop.md is true. */
    static void beyond() {
        step("records_deleted", () -> admin.deleteRecords(
                Map.of(new TopicPartition("admin-a", 0), RecordsToDelete.beforeOffset(2))).all().get());
        step("features", () -> admin.describeFeatures().featureMetadata().get().finalizedFeatures().keySet());
        step("scram_users", () -> admin.describeUserScramCredentials().all().get().keySet());
        step("client_quotas", () -> admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get().size());
    }

    static List<String> bindings(AclBindingFilter filter) throws Exception {
        return admin.describeAcls(filter).values().get().stream().map(AdminProbe::binding).sorted().toList();
    }

    static String binding(AclBinding b) {
        return String.join(" ", b.pattern().resourceType().name(), b.pattern().name(), b.pattern().patternType().name(),
                b.entry().principal(), b.entry().operation().name(), b.entry().permissionType().name());
    }

    static void acls() {
        step("cluster", () -> admin.describeCluster().nodes().get().stream().map(Node::id).sorted().toList());
        AccessControlEntry read = new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW);
        AclBinding topic = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL), read);
        AclBinding group = new AclBinding(new ResourcePattern(ResourceType.GROUP, "readers-", PatternType.PREFIXED), read);
        AclBindingFilter alice = new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
        // As with Kafka's ZooKeeper authorizer, the broker that wrote a change sees it at once and the
        // others when their watch fires: the admin client may ask any of them.
        step("acls_created", () -> {
            admin.createAcls(List.of(topic, group)).all().get();
            return until(() -> bindings(alice), found -> found.size() == 2);
        });
        AclBindingFilter onTopic = new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.MATCH), AccessControlEntryFilter.ANY);
        step("acls_on_topic", () -> until(() -> bindings(onTopic), found -> found.size() == 1));
        step("acls_deleted", () -> {
            var deleted = admin.deleteAcls(List.of(topic.toFilter())).all().get();
            List<String> left = until(() -> bindings(alice), found -> found.size() == 1);
            return Map.of("deleted", deleted.stream().map(AdminProbe::binding).toList(), "left", left);
        });
    }
}
