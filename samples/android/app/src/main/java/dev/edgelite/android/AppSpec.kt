package dev.edgelite.android

import android.content.Context
import org.json.JSONObject
import java.io.FileInputStream
import java.nio.MappedByteBuffer
import java.nio.channels.FileChannel

/**
 * The app's contract with its models, read from assets/edgelite_app.json (written by
 * samples/android/make_assets.py; tests/samples/test_android.py makes these same calls in
 * Python on the same files). Nothing about the models is hard-coded in the Kotlin code.
 */
class AppSpec private constructor(json: JSONObject) {
    val camera = Screen(json.getJSONObject("camera"))
    val personalization = Screen(json.getJSONObject("personalization"))

    /** One tensor of a signature: name, shape (-1 for a dimension set while running), dtype. */
    class TensorSpec(val name: String, val shape: IntArray, val dtype: String) {
        /** Values in the tensor with every -1 taken as 1. */
        val elements: Int get() = shape.fold(1) { n, d -> n * maxOf(d, 1) }
    }

    class Signature(json: JSONObject) {
        val inputs: List<TensorSpec> = tensors(json.getJSONObject("inputs"))
        val outputs: List<TensorSpec> = tensors(json.getJSONObject("outputs"))

        private fun tensors(json: JSONObject): List<TensorSpec> =
            // org.json keeps the file's order: the checkpoint layout depends on it.
            json.keys().asSequence().map { name ->
                val t = json.getJSONObject(name)
                val shape = t.getJSONArray("shape")
                TensorSpec(name, IntArray(shape.length()) { shape.getInt(it) }, t.getString("dtype"))
            }.toList()
    }

    /** How a screen turns pixels into the model's input: (pixel - mean) / std per channel. */
    class ImageSpec(json: JSONObject) {
        val resize: String = json.getString("resize")
        val channels: String = json.getString("channels")
        val mean: FloatArray = floats(json, "mean")
        val std: FloatArray = floats(json, "std")
        val padValue: Float = json.optDouble("pad_value", 0.0).toFloat()

        private fun floats(json: JSONObject, key: String): FloatArray {
            val a = json.getJSONArray(key)
            return FloatArray(a.length()) { a.getDouble(it).toFloat() }
        }
    }

    class Screen(json: JSONObject) {
        val model: String = json.getString("model")
        val labels: String = json.getString("labels")
        val image = ImageSpec(json.getJSONObject("image"))
        val signatures: Map<String, Signature> = json.getJSONObject("signatures").let { s ->
            s.keys().asSequence().associateWith { Signature(s.getJSONObject(it)) }
        }
        /** The camera model's one signature key. */
        val signature: String? = json.optString("signature").ifEmpty { null }
        /** Personalization: role (infer, train, save, restore) -> signature key. */
        val keys: Map<String, String> = json.optJSONObject("keys")?.let { k ->
            k.keys().asSequence().associateWith { k.getString(it) }
        } ?: emptyMap()
        val batchSize: Int = json.optInt("batch_size", 0)
        val steps: Int = json.optInt("steps", 0)
        val checkpoint: String = json.optString("checkpoint")
        val saveInput: String = json.optString("save_input")
    }

    companion object {
        const val FILE = "edgelite_app.json"

        fun load(context: Context): AppSpec =
            AppSpec(JSONObject(context.assets.open(FILE).bufferedReader().use { it.readText() }))

        /** A model from the APK's assets, memory-mapped (assets are stored uncompressed). */
        fun mapAsset(context: Context, name: String): MappedByteBuffer =
            context.assets.openFd(name).use { fd ->
                FileInputStream(fd.fileDescriptor).use { stream ->
                    stream.channel.map(FileChannel.MapMode.READ_ONLY, fd.startOffset, fd.declaredLength)
                }
            }

        fun readLabels(context: Context, name: String): List<String> =
            context.assets.open(name).bufferedReader().use { r ->
                r.readLines().map { it.trim() }.filter { it.isNotEmpty() }
            }
    }
}
