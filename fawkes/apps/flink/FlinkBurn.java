// The lab's CPU-bound Flink job (kind flink-hdfs), the counterpart of burn.py for the mixed pool: the same
// word count as FlinkWordCount, each of its PARTITIONS split tasks first hashing (SHA-256 chains) for about
// CORE_SECONDS_PER_PARTITION seconds of one core, so that its task time scales with the CPU a node has;
// two tasks write the counts.  Tests and the lab only.
//
// usage: flink run -c fawkes.apps.FlinkBurn fawkes-flink-apps.jar INPUT OUTPUT PARTITIONS CORE_SECONDS_PER_PARTITION
package fawkes.apps;

public class FlinkBurn {
    public static void main(String[] args) throws Exception {
        FlinkWordCount.run(args, "CORE_SECONDS_PER_PARTITION", true, 2);
    }
}
