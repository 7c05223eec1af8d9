// The lab's streaming Flink job (kind flink-hdfs, reactive mode): the numbers 0 .. COUNT-1 from a replayable
// source, spread over tasks that pass at most RATE a second each, each number written once as a line to OUTPUT by an exactly-once file sink
// (its files are committed at checkpoints; a restart from a checkpoint drops what was written after it and
// the source replays from there).  Run in application mode with the adaptive scheduler in reactive mode, it
// rescales whenever a TaskManager joins or leaves; bench/bench_flink_rescale.py checks that every number
// appears exactly once in the committed output.  Tests and the lab only.
//
// usage: standalone-job.sh start-foreground --job-classname fawkes.apps.FlinkCounter --jars JAR \
//            OUTPUT COUNT RATE
package fawkes.apps;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.filesystem.bucketassigners.BasePathBucketAssigner;
import org.apache.flink.streaming.api.functions.sink.filesystem.rollingpolicies.OnCheckpointRollingPolicy;

public class FlinkCounter {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: FlinkCounter OUTPUT COUNT RATE");
            System.exit(2);
        }
        long count = Long.parseLong(args[1]);
        double rate = Double.parseDouble(args[2]);
        if (count < 1 || count > 1_000_000_000L || !(rate > 0 && rate <= 1_000_000)) {
            System.err.println("COUNT must be 1..1e9 and RATE (records a second per task) 0..1e6");
            System.exit(2);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        long pause = (long) (1_000_000_000L / rate);
        // one source task (its numbers in one split: a source does not re-split when the job rescales), the
        // throttled tasks and the sink (a chain of their own: Flink would chain a rebalance between equal
        // parallelisms) scale with the slots
        env.fromSequence(0, count - 1).setParallelism(1).setMaxParallelism(1)
                .rebalance()
                .map(new Throttle(pause)).name("throttle").startNewChain()
                .sinkTo(FileSink.forRowFormat(new Path(args[0]), new SimpleStringEncoder<String>("UTF-8"))
                        .withBucketAssigner(new BasePathBucketAssigner<>())
                        .withRollingPolicy(OnCheckpointRollingPolicy.build()).build()).name("files");
        env.execute("fawkes-counter");
    }

    /** One record every {@code pauseNanos} at most (a task's rate), as text. */
    static class Throttle implements MapFunction<Long, String> {
        private final long pauseNanos;

        Throttle(long pauseNanos) {
            this.pauseNanos = pauseNanos;
        }

        @Override
        public String map(Long n) throws InterruptedException {
            Thread.sleep(pauseNanos / 1_000_000, (int) (pauseNanos % 1_000_000));
            return Long.toString(n);
        }
    }
}
