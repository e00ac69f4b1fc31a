package dev.edgelite.android

import android.content.Context
import android.content.res.AssetManager
import org.json.JSONArray
import org.json.JSONObject
import java.io.File

/** A Context whose assets are a folder (the stub AssetManager reads -Dassets.dir). */
class FolderContext(private val files: File) : Context() {
    override fun getAssets() = AssetManager()
    override fun getFilesDir() = files
}

/**
 * Runs the app's own Kotlin on the JVM, on a folder of assets: AppSpec parses the spec,
 * TextDirection and Personalizer open their models (the interpreter is a stub here: no
 * inference) and check them against it, and Personalizer.preprocess turns a test pad into the
 * model's image. Prints what they read as JSON, for run.sh to compare with Python's reading.
 */
fun main(args: Array<String>) {
    val context = FolderContext(File(args[0]))
    val spec = AppSpec.load(context)
    TextDirection(context, spec).close()
    val personalizer = Personalizer(context, spec)
    val pad = 256
    val gray = IntArray(pad * pad) { ((it % pad) * 7 + (it / pad) * 3) % 256 }
    val image = personalizer.preprocess(gray, pad, pad)
    val out = JSONObject()
    for ((screen, s) in listOf("camera" to spec.camera, "personalization" to spec.personalization)) {
        val signatures = JSONObject()
        for ((key, sig) in s.signatures) {
            fun tensors(list: List<AppSpec.TensorSpec>) = JSONArray().apply {
                for (t in list) put(JSONArray().put(t.name).put(JSONArray(t.shape.toList())).put(t.dtype))
            }
            signatures.put(key, JSONObject().put("inputs", tensors(sig.inputs))
                .put("outputs", tensors(sig.outputs)))
        }
        out.put(screen, JSONObject().put("model", s.model).put("signatures", signatures)
            .put("mean", JSONArray(s.image.mean.map { it.toDouble() }))
            .put("std", JSONArray(s.image.std.map { it.toDouble() }))
            .put("keys", JSONObject(s.keys as Map<*, *>)).put("batch_size", s.batchSize)
            .put("steps", s.steps).put("labels", JSONArray(AppSpec.readLabels(context, s.labels))))
    }
    out.put("pad", JSONArray(image.flatMap { row -> row.map { it[0].toDouble() } }))
    println(out.toString())
}
